package upstream

// Live endpoint sets: a pool's endpoints are replaced while it serves.
//
// Requests pick from a list that is swapped whole, so a change never blocks
// or slows picking. An address that stays keeps its *Endpoint, with its
// health verdict, its requests in flight and its health-check loop. A
// removed endpoint leaves the list at once; requests already sent to it
// finish, and its idle connections are closed when it leaves and again when
// its last request ends.
//
// New endpoints of a pool without a health check take traffic at once. In a
// health-checked pool they wait for their first check, which runs as soon as
// they are added (not at the next interval), and join on its first success,
// as at start-up. So that this wait never leaves a pool without a healthy
// endpoint when its whole set is replaced (A → B), endpoints removed while
// healthy linger: they keep taking traffic, and being checked, only while
// no endpoint of the new set is healthy and some of them still wait for
// their first verdict. They leave as soon as a new endpoint passes, or
// every new endpoint has failed its first check (then the pool is really
// without a healthy endpoint), or a check of their own fails; the wait is
// bounded by one health-check timeout.

// SetEndpoints replaces the pool's set of endpoints by addrs ("host:port",
// duplicates ignored) and returns the endpoints added and removed. It is
// cheap when the set is unchanged.
func (p *Pool) SetEndpoints(addrs []string) (added, removed []*Endpoint) {
	p.mu.Lock()
	cur := *p.endpoints.Load()
	if sameAddrs(cur, addrs) {
		p.mu.Unlock()
		return nil, nil
	}
	old := make(map[string]*Endpoint, len(cur))
	for _, e := range cur {
		old[e.Addr] = e
	}
	next := make([]*Endpoint, 0, len(addrs))
	seen := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		if seen[a] {
			continue
		}
		seen[a] = true
		if e := old[a]; e != nil {
			next = append(next, e)
			delete(old, a)
			continue
		}
		if i := indexAddr(p.lingering, a); i >= 0 {
			// Back before it left: it keeps its verdict and its checks.
			e := p.lingering[i]
			p.lingering = append(p.lingering[:i], p.lingering[i+1:]...)
			next = append(next, e)
			added = append(added, e)
			continue
		}
		e := p.newEndpoint(a)
		next = append(next, e)
		added = append(added, e)
		if p.checker != nil {
			p.startCheckLocked(e)
		}
	}
	for _, e := range cur {
		if old[e.Addr] != e {
			continue
		}
		removed = append(removed, e)
		if e.healthy.Load() && p.Backend.HealthCheck != nil {
			p.lingering = append(p.lingering, e)
			continue
		}
		p.retireLocked(e)
	}
	p.endpoints.Store(&next)
	p.rebuildLocked()
	p.mu.Unlock()
	return added, removed
}

// Lingering returns the endpoints removed from the set that still take
// traffic because no endpoint of the new set is healthy yet.
func (p *Pool) Lingering() []*Endpoint {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*Endpoint(nil), p.lingering...)
}

// retireLocked takes e out of the pool for good: its health checks stop and
// its idle connections are closed, now and again when its last request in
// flight ends (Endpoint.end), as that request's connection goes back idle.
func (p *Pool) retireLocked(e *Endpoint) {
	e.retired.Store(true)
	if e.stopCheck != nil {
		e.stopCheck()
		e.stopCheck = nil
	}
	p.closeIdle(e.Addr)
}

// closeIdle closes the idle connections to addr. The fast path keeps them
// by address; http.Transport cannot close one host's, so its idle
// connections to every endpoint go (they are dialled again on demand).
func (p *Pool) closeIdle(addr string) {
	p.fast.closeIdleAddr(addr)
	p.Transport.CloseIdleConnections()
}

// closeIdleAddr closes the idle connections to addr.
func (c *h1Client) closeIdleAddr(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, pc := range c.idle[addr] {
		pc.c.Close()
	}
	delete(c.idle, addr)
}

func sameAddrs(eps []*Endpoint, addrs []string) bool {
	if len(eps) != len(addrs) {
		return false
	}
	for i, e := range eps {
		if e.Addr != addrs[i] {
			return false
		}
	}
	return true
}

func indexAddr(eps []*Endpoint, addr string) int {
	for i, e := range eps {
		if e.Addr == addr {
			return i
		}
	}
	return -1
}

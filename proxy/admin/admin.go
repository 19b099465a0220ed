// Package admin serves the gateway's admin endpoints: /healthz, /livez and
// /readyz in kube-apiserver's style, /metrics, and JSON debug documents. It
// knows nothing of the gateway itself: checks and documents are handed in.
package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/pprof"
	"slices"
	"strconv"
	"strings"

	"github.com/revgate/revgate/revisions"
)

// Check is one named health check. Run returns an optional detail shown on
// the verbose "[+]name ok" line, or an error that fails the check.
type Check struct {
	Name string
	Run  func() (detail string, err error)
}

// Headers stamped on every admin response, so that a startup monitor can
// ignore answers from another process sharing the port (SO_REUSEPORT).
const (
	HeaderRevision = revisions.HeaderRevision
	HeaderPID      = revisions.HeaderPID
)

// Options describe what the admin handler serves.
type Options struct {
	// Revision and PID are stamped into every response's headers.
	Revision int
	PID      int
	// Healthz, Livez and Readyz are the checks of each endpoint, in order.
	Healthz, Livez, Readyz []Check
	// Metrics serves /metrics (omitted when nil).
	Metrics http.Handler
	// Pprof serves net/http/pprof under /debug/pprof/ when true.
	Pprof bool
	// Debug maps paths (e.g. "/debug/config/routes") to functions returning
	// the value served as indented JSON.
	Debug map[string]func() any
}

// NewHandler returns the admin handler.
func NewHandler(o Options) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", checksHandler("healthz", o.Healthz))
	mux.Handle("GET /livez", checksHandler("livez", o.Livez))
	mux.Handle("GET /readyz", checksHandler("readyz", o.Readyz))
	for _, group := range []struct {
		name   string
		checks []Check
	}{{"healthz", o.Healthz}, {"livez", o.Livez}, {"readyz", o.Readyz}} {
		for _, c := range group.checks {
			mux.Handle("GET /"+group.name+"/"+c.Name, checksHandler(group.name, []Check{c}))
		}
	}
	if o.Metrics != nil {
		mux.Handle("GET /metrics", o.Metrics)
	}
	if o.Pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	for path, f := range o.Debug {
		mux.Handle("GET "+path, jsonHandler(f))
	}
	rev, pid := strconv.Itoa(o.Revision), strconv.Itoa(o.PID)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(HeaderRevision, rev)
		w.Header().Set(HeaderPID, pid)
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Server", "revgate")
		mux.ServeHTTP(w, r)
	})
}

// checksHandler runs checks like kube-apiserver: 200 "ok" when all pass,
// otherwise 500 with one line per check; ?verbose lists them on success too;
// ?exclude=name (repeatable) skips checks.
func checksHandler(endpoint string, checks []Check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		excluded := q["exclude"]
		_, verbose := q["verbose"]
		var b strings.Builder
		failed := false
		for _, c := range checks {
			if slices.Contains(excluded, c.Name) {
				fmt.Fprintf(&b, "[+]%s excluded: ok\n", c.Name)
				continue
			}
			detail, err := c.Run()
			switch {
			case err != nil:
				failed = true
				fmt.Fprintf(&b, "[-]%s failed: %v\n", c.Name, err)
			case detail != "":
				fmt.Fprintf(&b, "[+]%s ok: %s\n", c.Name, detail)
			default:
				fmt.Fprintf(&b, "[+]%s ok\n", c.Name)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if failed {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "%s%s check failed\n", b.String(), endpoint)
			return
		}
		if !verbose {
			fmt.Fprint(w, "ok")
			return
		}
		fmt.Fprintf(w, "%s%s check passed\n", b.String(), endpoint)
	})
}

func jsonHandler(f func() any) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := json.MarshalIndent(f(), "", "  ")
		if err != nil {
			http.Error(w, "encode: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(append(data, '\n'))
	})
}

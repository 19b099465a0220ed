// Package e2e drives the built revgate binary through the startup-monitor
// test plan with `revgate supervise` as the runtime: bad manifests, bad
// flags, bad configuration, revisions that never become ready or whose
// upstreams are down, rollouts under load, crashes of the supervisor and
// the monitor, and live endpoints changing under load without a revision.
// Every scenario has its own root folder and ports, so they run
// in parallel. `go test -short` skips the suite.
package e2e

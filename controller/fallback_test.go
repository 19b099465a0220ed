package controller

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/revgate/revgate/installer"
	"github.com/revgate/revgate/proxy/model"
	"github.com/revgate/revgate/revisions"
)

// A broken Ingress is installed with the rest; it gets an Event and no
// address while the healthy Ingress is served. An Ingress whose TLS Secret
// is broken is excluded with it, and both get their Events.
func TestBrokenObjectsGetEvents(t *testing.T) {
	t.Parallel()
	c := adminClients(t)
	e := newEnv(t, c)
	e.createService("web", "10.0.0.1")
	bad := []byte("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n")
	createTLSSecret(t, e, "bad-tls", bad, bad)
	e.startController(c, nil)
	e.createIngress("healthy", "healthy.example", "web")
	e.createIngress("broken", "broken.example", "missing")
	e.createIngress("excluded", "excluded.example", "web")
	e.editIngress("excluded", func(ing *networkingv1.Ingress) {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"excluded.example"}, SecretName: "bad-tls"}}
	})
	e.waitRevision(1)
	waitFor(t, waitLong, "all three Ingresses in one revision", func() (bool, string) {
		revs := e.revisions()
		n := revs[len(revs)-1]
		for _, name := range []string{"healthy", "broken"} {
			if !strings.Contains(e.ingressFile(n, name), "host: "+name+".example") {
				return false, name + " missing"
			}
		}
		return strings.Contains(e.ingressFile(n, "excluded"), "bad-tls"), "excluded without TLS"
	})

	tests := []struct {
		object, reason, message string
	}{
		{"broken", EventTranslationFailed, "service " + e.ns + "/missing not found"},
		{"bad-tls", EventTranslationFailed, "invalid key pair"},
		{"excluded", EventFallbackExcluded, "Secret:" + e.ns + "/bad-tls"},
	}
	for _, tt := range tests {
		t.Run(tt.object, func(t *testing.T) {
			e := e.in(t)
			ev := e.waitEvent(e.ns, tt.object, tt.reason)
			if ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Message, tt.message) || ev.Source.Component != Component {
				t.Fatalf("event %s %s from %s: %q, want it to mention %q", ev.Type, ev.Reason, ev.Source.Component, ev.Message, tt.message)
			}
			if ev.InvolvedObject.UID == "" {
				t.Fatal("the Event's object has no uid: kubectl describe would not show it")
			}
		})
	}
	t.Run("addresses", func(t *testing.T) {
		e := e.in(t)
		waitFor(t, waitLong, "the healthy Ingress's address", func() (bool, string) {
			got := e.ingressAddresses("healthy")
			return reflect.DeepEqual(got, []string{publishAddr}), strings.Join(got, ",")
		})
		e.settle()
		for _, name := range []string{"broken", "excluded"} {
			if got := e.ingressAddresses(name); len(got) != 0 {
				t.Errorf("Ingress %s is not served but has addresses %v", name, got)
			}
		}
	})
	t.Run("one Event per object and message", func(t *testing.T) {
		e := e.in(t)
		e.settle()
		e.settle()
		if evs := e.events(e.ns, "broken", EventTranslationFailed); len(evs) != 1 || evs[0].Count != 1 {
			t.Fatalf("%d events, count %d", len(evs), evs[0].Count)
		}
	})
	t.Run("fixed, it is served", func(t *testing.T) {
		e := e.in(t)
		e.editIngress("broken", func(ing *networkingv1.Ingress) {
			ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "web"
		})
		waitFor(t, waitLong, "the fixed Ingress's address", func() (bool, string) {
			got := e.ingressAddresses("broken")
			return reflect.DeepEqual(got, []string{publishAddr}), strings.Join(got, ",")
		})
	})
	t.Run("another class's Ingress is left alone", func(t *testing.T) {
		e := e.in(t)
		other := ingressObj(e.ns, "other", "nginx", "other.example", "web", "")
		if _, err := c.client.NetworkingV1().Ingresses(e.ns).Create(e.ctx(), other, metav1Create); err != nil {
			t.Fatal(err)
		}
		n := len(e.revisions())
		e.settle()
		if got := len(e.revisions()); got != n {
			t.Fatalf("another class's Ingress cut a revision (%d → %d)", n, got)
		}
		if got := e.ingressAddresses("other"); len(got) != 0 {
			t.Fatalf("another class's Ingress got addresses %v", got)
		}
	})
	t.Run("an Ingress moved to another class loses the address", func(t *testing.T) {
		e := e.in(t)
		e.editIngress("healthy", func(ing *networkingv1.Ingress) {
			class := "nginx"
			ing.Spec.IngressClassName = &class
		})
		waitFor(t, waitLong, "the address cleared", func() (bool, string) {
			got := e.ingressAddresses("healthy")
			return len(got) == 0, strings.Join(got, ",")
		})
	})
}

// With --fallback=backfill, an Ingress broken by an edit is served in its
// last-known-good version: it keeps its address and gets a Backfilled Event
// (one Event, which names the error too).
func TestBackfilledObjectGetsEvent(t *testing.T) {
	t.Parallel()
	c := adminClients(t)
	e := newEnv(t, c)
	e.createService("web", "10.0.0.1")
	e.startController(c, func(o *Options) { o.Config.Fallback = model.FallbackBackfill })
	e.createIngress("web", "web.example", "web")
	e.waitRevision(1)
	// What the startup monitor does once revision 1 is good.
	if err := e.layout.Defaulted().SetLastKnownGood(revisions.OS(), 1); err != nil {
		t.Fatal(err)
	}
	e.editIngress("web", func(ing *networkingv1.Ingress) {
		ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "missing"
	})
	e.waitRevision(2)
	ev := e.waitEvent(e.ns, "web", EventFallbackBackfilled)
	if !strings.Contains(ev.Message, "last-known-good") || !strings.Contains(ev.Message, "missing") {
		t.Fatalf("event message %q", ev.Message)
	}
	e.waitEvent(installer.PodNamespace, e.opts.Layout.Target+"-"+e.opts.NodeName, EventFallbackSucceeded)
	e.settle()
	if got := e.ingressAddresses("web"); !reflect.DeepEqual(got, []string{publishAddr}) {
		t.Fatalf("a backfilled Ingress is served and keeps its address, got %v", got)
	}
}

// When the startup monitor fell back from the revision holding the
// snapshot, the controller installs it again only after the monitor's retry
// time (never when the failure is not retried), and a different snapshot
// at once.
func TestRevisionFallbackIsRespected(t *testing.T) {
	t.Parallel()
	c := adminClients(t)
	e := newEnv(t, c)
	e.createService("web", "10.0.0.1")
	e.startController(c, nil)
	e.createIngress("web", "web.example", "web")
	e.waitRevision(1)
	l := e.layout.Defaulted()
	f := revisions.OS()
	if err := l.SetLastKnownGood(f, 1); err != nil {
		t.Fatal(err)
	}
	e.editIngress("web", func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].Host = "www.example" })
	e.waitRevision(2)

	// fallBack does what the monitor does when revision n fails: record
	// it and publish revision 1's manifest, annotated.
	fallBack := func(t *testing.T, n int, reason string, retry *time.Time) {
		t.Helper()
		lock, err := revisions.AcquireLock(context.Background(), l.LockFile, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Unlock()
		err = revisions.UpdateState(f, l.StateFile(), func(s *revisions.State) error {
			rs := s.Get(n)
			rs.Outcome, rs.Reason, rs.Message, rs.NextRetry = revisions.OutcomeFailed, reason, "readyz failed: [-]routes", retry
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		pod, err := readPod(l.RevisionPodManifest(1))
		if err != nil {
			t.Fatal(err)
		}
		pod.Annotations[revisions.AnnotationFallbackForRevision] = itoa(n)
		pod.Annotations[revisions.AnnotationFallbackReason] = reason
		data, err := installer.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Publish(l.PublishedPodManifest(), data); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("a retried failure waits for the retry time", func(t *testing.T) {
		e := e.in(t)
		retry := e.clock.Now().Add(time.Hour)
		fallBack(t, 2, revisions.ReasonNotReady, &retry)
		ev := e.waitEvent(installer.PodNamespace, l.Target+"-"+e.opts.NodeName, EventRevisionFallback)
		if !strings.Contains(ev.Message, "revision 2 failed with NotReady") || !strings.Contains(ev.Message, "serves revision 1") || !strings.Contains(ev.Message, retry.UTC().Format(time.RFC3339)) {
			t.Fatalf("event message %q", ev.Message)
		}
		e.settle()
		if revs := e.revisions(); !reflect.DeepEqual(revs, []int{1, 2}) {
			t.Fatalf("revisions %v: the failed snapshot was installed again before its retry time", revs)
		}
	})
	t.Run("a different snapshot installs at once", func(t *testing.T) {
		e := e.in(t)
		e.editIngress("web", func(ing *networkingv1.Ingress) { ing.Spec.Rules[0].Host = "web.example" })
		e.waitRevision(3)
	})
	t.Run("a failure that is not retried holds the snapshot for good", func(t *testing.T) {
		e := e.in(t)
		fallBack(t, 3, revisions.ReasonCrashLooping, nil)
		ev := e.waitEvent(installer.PodNamespace, l.Target+"-"+e.opts.NodeName, EventRevisionFallback)
		waitFor(t, waitLong, "the CrashLooping Event", func() (bool, string) {
			for _, ev := range e.events(installer.PodNamespace, l.Target+"-"+e.opts.NodeName, EventRevisionFallback) {
				if strings.Contains(ev.Message, "revision 3 failed with CrashLooping") && strings.Contains(ev.Message, "not installed again until it changes") {
					return true, ""
				}
			}
			return false, ev.Message
		})
		e.settle()
		e.clock.Step(24 * time.Hour)
		e.settle()
		if revs := e.revisions(); !reflect.DeepEqual(revs, []int{1, 2, 3}) {
			t.Fatalf("revisions %v: a crash-looping snapshot was installed again", revs)
		}
	})
	t.Run("a retry the monitor missed is installed by the controller", func(t *testing.T) {
		e := e.in(t)
		retry := e.clock.Now().Add(time.Hour)
		fallBack(t, 3, revisions.ReasonNotReady, &retry)
		e.settle()
		// At the retry time the monitor may still be about to roll it out:
		// the controller gives it the retry grace.
		e.clock.Step(time.Hour)
		e.settle()
		if revs := e.revisions(); !reflect.DeepEqual(revs, []int{1, 2, 3}) {
			t.Fatalf("revisions %v: installed again within the retry grace", revs)
		}
		e.clock.Step(DefaultRetryGrace)
		e.waitRevision(4)
		e.waitEvent(installer.PodNamespace, l.Target+"-"+e.opts.NodeName, EventRevisionReinstalled)
		if e.ingressFile(4, "web") != e.ingressFile(3, "web") {
			t.Fatal("revision 4 is not revision 3's snapshot")
		}
	})
}

// An install interrupted after the revision was written and before it was
// published leaves a complete revision no monitor looks at; the controller
// publishes that revision rather than take it for rolled out, and cuts no
// new one.
func TestInterruptedInstallIsCompleted(t *testing.T) {
	t.Parallel()
	c := adminClients(t)
	e := newEnv(t, c)
	e.createService("web", "10.0.0.1")
	e.createIngress("web", "web.example", "web")
	e.startController(c, nil)
	e.waitRevision(1)
	e.stopController()
	l := e.layout.Defaulted()
	f := revisions.OS()
	// Revision 2 is revision 1 again, as the installer would have written it.
	if err := copyRevision(l, 1, 2); err != nil {
		t.Fatal(err)
	}
	err := revisions.UpdateState(f, l.StateFile(), func(s *revisions.State) error {
		s.Get(2).Outcome = revisions.OutcomeInstalled
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(n int) {
		t.Helper()
		for _, p := range [][2]string{{l.RevisionMonitorManifest(n), l.PublishedMonitorManifest()}, {l.RevisionPodManifest(n), l.PublishedPodManifest()}} {
			data, err := os.ReadFile(p[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Publish(p[1], data); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Published, revision 2 holds the snapshot: nothing to do.
	publish(2)
	e.startController(c, nil)
	e.settle()
	if revs := e.revisions(); !reflect.DeepEqual(revs, []int{1, 2}) {
		t.Fatalf("revisions %v: revision 2 was not taken for the snapshot", revs)
	}
	e.stopController()
	// Not published (revision 1's manifests in place): an interrupted
	// install. Revision 2 is published as it is; no revision is cut.
	publish(1)
	e.startController(c, nil)
	waitFor(t, waitLong, "revision 2 published", func() (bool, string) {
		n, err := l.NewestPublishedRevision(f)
		return err == nil && n == 2, fmt.Sprintf("published revision %d (%v)", n, err)
	})
	e.settle()
	if revs := e.revisions(); !reflect.DeepEqual(revs, []int{1, 2}) {
		t.Fatalf("revisions %v: a revision was cut for a snapshot written already", revs)
	}
}

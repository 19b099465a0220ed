package controller

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/revgate/revgate/internal/clocktest"
)

// The waits between calls run on the controller's clock, which the test
// steps: each call waits for the step it expects before it is made.
func TestPatientListWatch(t *testing.T) {
	refused := &syscallError{syscall.ECONNREFUSED}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", errors.New("no"))
	tests := []struct {
		name    string
		errs    []error // the calls' errors, in order; then success
		wantErr error
		// waits are the delays before the second call, the third, ...
		waits []time.Duration
	}{
		{name: "an outage is waited out", errs: []error{refused, refused, apierrors.NewServiceUnavailable("starting")},
			waits: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}},
		{name: "the waits double up to a second", errs: []error{refused, refused, refused, refused, refused, refused},
			waits: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}},
		{name: "a refusal is returned at once", errs: []error{forbidden}, wantErr: forbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, clk := patientCache()
			defer c.cancel()
			var calls atomic.Int32
			lw := c.patient(func(context.Context, metav1.ListOptions) (runtime.Object, error) {
				n := int(calls.Add(1))
				if n <= len(tt.errs) {
					return nil, tt.errs[n-1]
				}
				return &metav1.List{}, nil
			}, nil)
			done := make(chan error, 1)
			go func() {
				_, err := lw.List(metav1.ListOptions{})
				done <- err
			}()
			for i, d := range tt.waits {
				waitPending(t, clk, d, 1)
				if n := calls.Load(); n != int32(i+1) {
					t.Fatalf("%d calls before wait %d, want %d", n, i+1, i+1)
				}
				clk.Step(d)
			}
			if err := <-done; !errors.Is(err, tt.wantErr) || calls.Load() != int32(len(tt.waits)+1) {
				t.Fatalf("err %v after %d calls, want %v after %d", err, calls.Load(), tt.wantErr, len(tt.waits)+1)
			}
		})
	}
	t.Run("a stop ends the wait", func(t *testing.T) {
		c, clk := patientCache()
		lw := c.patient(func(context.Context, metav1.ListOptions) (runtime.Object, error) { return nil, refused }, nil)
		done := make(chan error, 1)
		go func() {
			_, err := lw.List(metav1.ListOptions{})
			done <- err
		}()
		waitPending(t, clk, patientInitial, 1)
		c.cancel()
		if err := <-done; err == nil {
			t.Fatal("a list during an outage returned without an error after the stop")
		}
		if clk.Pending(patientInitial) != 0 {
			t.Fatal("the wait's timer outlives the stop")
		}
	})
	// Regression: the watch call's context was cancelled as soon as the call
	// returned, so every watch ended at once and the reflector watched again
	// in a busy loop.
	t.Run("a watch outlives the call that opened it", func(t *testing.T) {
		c, _ := patientCache()
		defer c.cancel()
		var watchCtx context.Context
		lw := c.patient(nil, func(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) {
			watchCtx = ctx
			return watch.NewFake(), nil
		})
		if _, err := lw.Watch(metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := watchCtx.Err(); err != nil {
			t.Fatalf("the watch's context is done once the call returned: %v", err)
		}
		c.cancel()
		if watchCtx.Err() == nil {
			t.Fatal("stopping the informers does not end the watch")
		}
	})
}

// patientCache is an informerCache with what patient needs, on a fake clock.
func patientCache() (*informerCache, *clocktest.Clock) {
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := &informerCache{log: slog.New(slog.NewTextHandler(io.Discard, nil)), clock: clk}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, clk
}

// syscallError is a connection error as net returns it.
type syscallError struct{ errno syscall.Errno }

func (e *syscallError) Error() string { return "dial tcp 127.0.0.1:6443: connect: " + e.errno.Error() }
func (e *syscallError) Unwrap() error { return e.errno }

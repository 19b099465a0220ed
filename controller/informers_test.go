package controller

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

func TestPatientListWatch(t *testing.T) {
	refused := &syscallError{syscall.ECONNREFUSED}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", errors.New("no"))
	tests := []struct {
		name      string
		errs      []error // the calls' errors, in order; then success
		wantErr   error
		wantCalls int
	}{
		{name: "an outage is waited out", errs: []error{refused, refused, apierrors.NewServiceUnavailable("starting")}, wantCalls: 4},
		{name: "a refusal is returned at once", errs: []error{forbidden}, wantErr: forbidden, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &informerCache{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			c.ctx, c.cancel = context.WithCancel(context.Background())
			defer c.cancel()
			calls := 0
			next := func() error {
				calls++
				if calls <= len(tt.errs) {
					return tt.errs[calls-1]
				}
				return nil
			}
			lw := c.patient(func(context.Context, metav1.ListOptions) (runtime.Object, error) {
				return &metav1.List{}, next()
			}, nil)
			_, err := lw.List(metav1.ListOptions{})
			if !errors.Is(err, tt.wantErr) || calls != tt.wantCalls {
				t.Fatalf("err %v after %d calls, want %v after %d", err, calls, tt.wantErr, tt.wantCalls)
			}
		})
	}
	t.Run("a stop ends the wait", func(t *testing.T) {
		c := &informerCache{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		c.ctx, c.cancel = context.WithCancel(context.Background())
		lw := c.patient(func(context.Context, metav1.ListOptions) (runtime.Object, error) { return nil, refused }, nil)
		time.AfterFunc(300*time.Millisecond, c.cancel)
		if _, err := lw.List(metav1.ListOptions{}); err == nil {
			t.Fatal("a list during an outage returned without an error after the stop")
		}
	})
	// Regression: the watch call's context was cancelled as soon as the call
	// returned, so every watch ended at once and the reflector watched again
	// in a busy loop.
	t.Run("a watch outlives the call that opened it", func(t *testing.T) {
		c := &informerCache{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		c.ctx, c.cancel = context.WithCancel(context.Background())
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

// syscallError is a connection error as net returns it.
type syscallError struct{ errno syscall.Errno }

func (e *syscallError) Error() string { return "dial tcp 127.0.0.1:6443: connect: " + e.errno.Error() }
func (e *syscallError) Unwrap() error { return e.errno }

package doubling

import (
	"testing"
	"time"
)

func TestSchedule(t *testing.T) {
	b := New(10*time.Second, 45*time.Second, nil)
	for i, want := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 45 * time.Second, 45 * time.Second} {
		if got := b.NextBackOff(); got != want {
			t.Fatalf("delay %d = %v, want %v", i, got, want)
		}
	}
	b.Reset()
	if got := b.NextBackOff(); got != 10*time.Second {
		t.Fatalf("after Reset: %v", got)
	}
}

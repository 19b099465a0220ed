package clock

import (
	"testing"
	"time"
)

func TestFakeTicker(t *testing.T) {
	start := time.Unix(100, 0)
	f := NewFake(start)
	tk := f.NewTicker(10 * time.Second)
	select {
	case <-tk.C():
		t.Fatal("tick before time moved")
	default:
	}
	f.Advance(9 * time.Second)
	select {
	case <-tk.C():
		t.Fatal("tick before the period elapsed")
	default:
	}
	f.Advance(time.Second)
	select {
	case now := <-tk.C():
		if !now.Equal(start.Add(10 * time.Second)) {
			t.Fatalf("tick at %v", now)
		}
	default:
		t.Fatal("no tick after the period")
	}
	// Several periods at once deliver one tick, like time.Ticker.
	f.Advance(35 * time.Second)
	<-tk.C()
	select {
	case <-tk.C():
		t.Fatal("more than one buffered tick")
	default:
	}
	if f.Tickers() != 1 {
		t.Fatalf("tickers %d", f.Tickers())
	}
	tk.Stop()
	if f.Tickers() != 0 {
		t.Fatal("stopped ticker still registered")
	}
	if got := f.Now(); !got.Equal(start.Add(45 * time.Second)) {
		t.Fatalf("now %v", got)
	}
}

package monitor

import (
	"reflect"
	"testing"
)

func TestVerboseURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:9901/readyz":               "http://127.0.0.1:9901/readyz?verbose",
		"http://127.0.0.1:9901/readyz?exclude=x":     "http://127.0.0.1:9901/readyz?exclude=x&verbose",
		"http://127.0.0.1:9901/readyz?verbose":       "http://127.0.0.1:9901/readyz?verbose",
		"http://127.0.0.1:9901/readyz?verbose=1&a=b": "http://127.0.0.1:9901/readyz?verbose=1&a=b",
	} {
		if got := verboseURL(in); got != want {
			t.Errorf("verboseURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFailedChecks(t *testing.T) {
	body := "[+]ping ok\n[-]config failed: bad\n  [-]dependency/db\tfailed: down\n[-]bare\nreadyz check failed\n"
	names, lines := failedChecks(body)
	if want := []string{"config", "dependency/db", "bare"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("names = %q, want %q", names, want)
	}
	if lines[0] != "[-]config failed: bad" || len(lines) != 3 {
		t.Fatalf("lines = %q", lines)
	}
	if allDependencies(names) || !allDependencies(names[1:2]) || allDependencies(nil) {
		t.Fatal("allDependencies wrong")
	}
}

package httpsyntax

import "testing"

func TestSets(t *testing.T) {
	for _, c := range []struct {
		set  *Set
		in   string
		out  string
		name string
	}{
		{PChar, "aZ09-._~!$&'()*+,;=:@", "/?#[]% \"<>\\^`{|}\x00\x7f\x80", "pchar"},
		{Token, "aZ09!#$%&'*+-.^_`|~", "():;<=>?@[]{}\" \t/\\,", "token"},
		{Unreserved, "aZ09-._~", "!$&'()*+,;=:@/%", "unreserved"},
	} {
		for i := 0; i < len(c.in); i++ {
			if !c.set[c.in[i]] {
				t.Errorf("%s: %q missing", c.name, c.in[i])
			}
		}
		for i := 0; i < len(c.out); i++ {
			if c.set[c.out[i]] {
				t.Errorf("%s: %q included", c.name, c.out[i])
			}
		}
	}
}

func TestUnhex(t *testing.T) {
	for in, want := range map[byte]byte{'0': 0, '9': 9, 'a': 10, 'F': 15} {
		if got, ok := Unhex(in); !ok || got != want {
			t.Errorf("Unhex(%q) = %d, %v", in, got, ok)
		}
	}
	for _, in := range []byte("gG/: ") {
		if _, ok := Unhex(in); ok {
			t.Errorf("Unhex(%q) accepted", in)
		}
	}
}

package rawflag

import "testing"

func TestLast(t *testing.T) {
	tests := []struct {
		args   []string
		want   string
		wantOK bool
	}{
		{[]string{"--revision=3"}, "3", true},
		{[]string{"--revision", "4", "--x"}, "4", true},
		{[]string{"--revision=3", "--revision=5"}, "5", true},
		{[]string{"--revision="}, "", true},
		{[]string{"--revisions=9"}, "", false},
		{[]string{"--", "--revision=3"}, "", false},
		{[]string{"--revision"}, "", false},
		{nil, "", false},
	}
	for _, tt := range tests {
		if got, ok := Last(tt.args, "revision"); got != tt.want || ok != tt.wantOK {
			t.Errorf("Last(%q) = %q, %v; want %q, %v", tt.args, got, ok, tt.want, tt.wantOK)
		}
	}
}

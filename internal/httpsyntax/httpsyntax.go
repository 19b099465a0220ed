// Package httpsyntax holds the byte classes of HTTP and URI syntax shared by
// the gateway's path normalization and its request framing checks.
package httpsyntax

// Set marks bytes of a class.
type Set [256]bool

// AlnumPlus returns the set of ASCII letters and digits plus the bytes of
// extra.
func AlnumPlus(extra string) *Set {
	var s Set
	for c := 'a'; c <= 'z'; c++ {
		s[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		s[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		s[c] = true
	}
	for i := 0; i < len(extra); i++ {
		s[extra[i]] = true
	}
	return &s
}

var (
	// PChar are the bytes that stand for themselves in a canonical URI path
	// segment: unreserved, sub-delims, ':' and '@' (RFC 3986 section 3.3).
	PChar = AlnumPlus("-._~!$&'()*+,;=:@")
	// Token are the bytes of an RFC 9110 token (field names, methods).
	Token = AlnumPlus("!#$%&'*+-.^_`|~")
	// Unreserved are RFC 3986's unreserved bytes.
	Unreserved = AlnumPlus("-._~")
)

// Unhex returns the value of a hexadecimal digit.
func Unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

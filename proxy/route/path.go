package route

import (
	"strings"

	"github.com/revgate/revgate/internal/httpsyntax"
)

// EscapedSlashes says what an encoded slash (%2F) or backslash (%5C, or a
// raw '\') in a request path does. An upstream that decodes them, or that
// takes a backslash for a separator (as many Windows and Java servers do),
// would otherwise see segments the gateway did not route by.
type EscapedSlashes string

// The EscapedSlashes actions.
const (
	// EscapedSlashesReject refuses the request with 400 (the default).
	EscapedSlashesReject EscapedSlashes = "reject"
	// EscapedSlashesKeep keeps them encoded, as data inside a segment: routes
	// match them as such and the upstream receives them encoded. Only for
	// upstreams that do not decode %2F or %5C into separators.
	EscapedSlashesKeep EscapedSlashes = "keep"
	// EscapedSlashesUnescape turns them into '/' before dot segments are
	// removed and routes are matched.
	EscapedSlashesUnescape EscapedSlashes = "unescape"
)

// PathOptions tune NormalizePath. The zero value is the safe default:
// escaped slashes rejected, repeated slashes merged.
type PathOptions struct {
	// EscapedSlashes is the action for %2F, %5C and '\'; "" is reject.
	EscapedSlashes EscapedSlashes
	// KeepRepeatedSlashes keeps empty segments ("//") instead of merging
	// them (`--merge-slashes=false`). An upstream that merges slashes before
	// resolving dot segments may then see another path than the gateway.
	KeepRepeatedSlashes bool
}

// PathError is why a request path is refused (answered 400).
type PathError struct {
	// Reason is a short lower-case explanation.
	Reason string
}

func (e *PathError) Error() string { return "invalid request path: " + e.Reason }

// Reasons of PathError.
var (
	errNotAbsolute   = &PathError{Reason: "not an absolute path"}
	errAboveRoot     = &PathError{Reason: "dot segments climb above the root"}
	errBadEscape     = &PathError{Reason: "invalid percent-encoding"}
	errNUL           = &PathError{Reason: "encoded NUL byte"}
	errEscapedSlash  = &PathError{Reason: "encoded slash (%2F)"}
	errBackslash     = &PathError{Reason: "backslash or encoded backslash (%5C)"}
	errHiddenDotSeg  = &PathError{Reason: "segment decodes to a dot segment (\"..;\", \"..%2F\", \"%2E%2E%3B\" and the like)"}
	errBadSlashesOpt = &PathError{Reason: "unknown escaped-slashes action"}
	errDotInRoute    = &PathError{Reason: "dot segments (\".\", \"..\") cannot be matched"}
)

// NormalizePath returns the canonical form of a request's escaped path (as
// url.URL.EscapedPath gives it). The gateway matches routes with it and
// forwards exactly it, so no upstream can resolve the forwarded path into
// another route's path:
//
//   - percent-encoded unreserved characters (ALPHA DIGIT - . _ ~) are
//     decoded; other escapes are kept with upper-case hex; bytes that may not
//     appear raw in a path are encoded;
//   - %2F, %5C and '\' follow o.EscapedSlashes;
//   - repeated slashes are merged unless o.KeepRepeatedSlashes;
//   - dot segments are removed (RFC 3986 section 5.2.4); a path that climbs
//     above "/" is refused, and so is a segment that some server would take
//     for a dot segment once decoded or stripped of ";parameters"
//     ("..;/", "..%3B", ".%2E%2F");
//   - an encoded NUL is refused.
//
// A path that is already canonical is returned as is, without allocating.
// The result is idempotent: NormalizePath of a result returns it unchanged.
func NormalizePath(escaped string, o PathOptions) (string, error) {
	switch o.EscapedSlashes {
	case "", EscapedSlashesReject, EscapedSlashesKeep, EscapedSlashesUnescape:
	default:
		return "", errBadSlashesOpt
	}
	if escaped == "" {
		return "/", nil
	}
	if escaped[0] != '/' {
		return "", errNotAbsolute
	}
	if isCanonical(escaped, o) {
		return escaped, nil
	}
	return normalizeSlow(escaped, o)
}

// CleanRoutePath validates a configured route path (Ingress path,
// IngressRoute match) and returns its canonical form, the one requests are
// normalized to. A dot segment, an escaped slash or backslash, an encoded NUL
// or a bad escape is refused: no normalized request path could match it.
func CleanRoutePath(p string) (string, error) {
	for _, seg := range strings.Split(p, "/") {
		if looksLikeDotSegment(decodeAll(seg)) {
			return "", errDotInRoute
		}
	}
	return NormalizePath(p, PathOptions{})
}

// isCanonical reports whether p (starting with '/') needs no change: only
// pchar bytes and separators, no escape, no dot segment, no segment starting
// like one followed by parameters, and no empty segment unless kept.
func isCanonical(p string, o PathOptions) bool {
	segStart := 1
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			if !httpsyntax.PChar[p[i]] {
				return false
			}
			continue
		}
		seg := p[segStart:i]
		if seg == "" {
			// An empty segment: "//" inside, or the trailing slash.
			if i < len(p) && !o.KeepRepeatedSlashes {
				return false
			}
		} else if seg[0] == '.' && looksLikeDotSegment(seg) {
			return false
		}
		segStart = i + 1
	}
	return true
}

// looksLikeDotSegment reports whether a canonical segment is a dot segment,
// or one once ";parameters" are stripped (as Tomcat and Jetty do).
func looksLikeDotSegment(seg string) bool {
	if i := strings.IndexByte(seg, ';'); i >= 0 {
		seg = seg[:i]
	}
	return seg == "." || seg == ".."
}

// writeEscaped writes c percent-encoded with upper-case hex.
func writeEscaped(b *strings.Builder, c byte) {
	const upperHex = "0123456789ABCDEF"
	b.WriteByte('%')
	b.WriteByte(upperHex[c>>4])
	b.WriteByte(upperHex[c&15])
}

// normalizeSlow builds the canonical path segment by segment.
func normalizeSlow(p string, o PathOptions) (string, error) {
	segs := make([]string, 0, 8)
	trailing := false
	var seg strings.Builder
	// flush ends the segment in seg; last says whether it ends the path.
	flush := func(last bool) error {
		s := seg.String()
		seg.Reset()
		switch {
		case s == ".":
			trailing = last
		case s == "..":
			if len(segs) == 0 {
				return errAboveRoot
			}
			segs = segs[:len(segs)-1]
			trailing = last
		case s == "":
			if last {
				trailing = true
			} else if o.KeepRepeatedSlashes {
				segs = append(segs, s)
			}
		default:
			if hidesDotSegment(s) {
				return errHiddenDotSeg
			}
			segs = append(segs, s)
			trailing = false
		}
		return nil
	}
	// separator handles an encoded or raw slash or backslash by the
	// escaped-slashes action.
	separator := func(escape string, backslash bool) error {
		switch o.EscapedSlashes {
		case EscapedSlashesUnescape:
			return flush(false)
		case EscapedSlashesKeep:
			seg.WriteString(escape)
			return nil
		}
		if backslash {
			return errBackslash
		}
		return errEscapedSlash
	}
	for i := 1; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '/':
			if err := flush(false); err != nil {
				return "", err
			}
		case c == '\\':
			if err := separator("%5C", true); err != nil {
				return "", err
			}
		case c == '%':
			if i+2 >= len(p) {
				return "", errBadEscape
			}
			hi, ok1 := httpsyntax.Unhex(p[i+1])
			lo, ok2 := httpsyntax.Unhex(p[i+2])
			if !ok1 || !ok2 {
				return "", errBadEscape
			}
			i += 2
			b := hi<<4 | lo
			switch {
			case b == 0:
				return "", errNUL
			case b == '/':
				if err := separator("%2F", false); err != nil {
					return "", err
				}
			case b == '\\':
				if err := separator("%5C", true); err != nil {
					return "", err
				}
			case httpsyntax.Unreserved[b]:
				seg.WriteByte(b)
			default:
				writeEscaped(&seg, b)
			}
		case httpsyntax.PChar[c]:
			seg.WriteByte(c)
		default:
			writeEscaped(&seg, c)
		}
	}
	if err := flush(true); err != nil {
		return "", err
	}
	n := 1
	for _, s := range segs {
		n += len(s) + 1
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(s)
	}
	if trailing || len(segs) == 0 {
		b.WriteByte('/')
	}
	return b.String(), nil
}

// hidesDotSegment reports whether a canonical segment that is not itself a
// dot segment would become one for a server that decodes every escape,
// splits on '/' and '\' and strips ";parameters" from segments.
func hidesDotSegment(seg string) bool {
	if strings.IndexByte(seg, '.') < 0 {
		// Canonical segments have every %2E decoded, so a decoded dot
		// comes from a literal one.
		return false
	}
	decoded := decodeAll(seg)
	for _, piece := range strings.FieldsFunc(decoded, func(r rune) bool { return r == '/' || r == '\\' }) {
		if looksLikeDotSegment(piece) {
			return true
		}
	}
	return looksLikeDotSegment(decoded)
}

// decodeAll decodes every valid escape of s once.
func decodeAll(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			hi, ok1 := httpsyntax.Unhex(s[i+1])
			lo, ok2 := httpsyntax.Unhex(s[i+2])
			if ok1 && ok2 {
				b.WriteByte(hi<<4 | lo)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

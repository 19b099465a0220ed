// Package logging sets up log/slog for revgate's commands: to journald with
// upper-case fields when the process runs under systemd, so that
// `journalctl REASON=CrashLooping` finds every fallback, and as text on
// stderr otherwise.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
)

// Log targets accepted by NewFor.
const (
	// TargetAuto logs to journald when stderr is connected to the journal (a
	// systemd service) and journald is reachable, to stderr otherwise.
	TargetAuto = "auto"
	// TargetStderr always logs text to stderr.
	TargetStderr = "stderr"
	// TargetJournald always logs to journald.
	TargetJournald = "journald"
)

// New returns the logger of a command for TargetAuto: a JournalHandler under
// systemd, a text handler on w otherwise (os.Stderr when w is nil). level is
// the minimum level.
func New(w io.Writer, level slog.Level) *slog.Logger {
	l, _ := NewFor(TargetAuto, w, level)
	return l
}

// NewFor returns the logger for a target (auto, stderr or journald).
func NewFor(target string, w io.Writer, level slog.Level) (*slog.Logger, error) {
	useJournal := false
	switch target {
	case TargetAuto, "":
		// A shell on a systemd host can reach journald too; only a process
		// whose stderr already goes to the journal logs there natively.
		stream, _ := journal.StderrIsJournalStream()
		useJournal = stream && journal.Enabled()
	case TargetJournald:
		useJournal = true
	case TargetStderr:
	default:
		return nil, fmt.Errorf("log target %q is not auto, stderr or journald", target)
	}
	if useJournal {
		return slog.New(NewJournalHandler(&slog.HandlerOptions{Level: level})), nil
	}
	if w == nil {
		w = os.Stderr
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})), nil
}

// SendFunc sends one journal entry; journal.Send has this signature.
type SendFunc func(message string, priority journal.Priority, vars map[string]string) error

// JournalHandler is a slog.Handler writing each record to journald as one
// entry: the message as MESSAGE, the level as PRIORITY, and every attribute
// as a field whose name is the attribute key upper-cased with anything but
// A-Z, 0-9 and _ replaced by _ (groups joined with _): "revision" becomes
// REVISION, "next_retry" NEXT_RETRY. SLOG_LEVEL keeps slog's level name.
type JournalHandler struct {
	opts   slog.HandlerOptions
	send   SendFunc
	attrs  map[string]string
	prefix string // group prefix, upper-case, ending with _
	mu     *sync.Mutex
}

var _ slog.Handler = (*JournalHandler)(nil)

// NewJournalHandler returns a handler sending with journal.Send; opts may be nil.
func NewJournalHandler(opts *slog.HandlerOptions) *JournalHandler {
	return NewJournalHandlerWith(journal.Send, opts)
}

// NewJournalHandlerWith returns a handler sending with send (tests pass a
// recorder).
func NewJournalHandlerWith(send SendFunc, opts *slog.HandlerOptions) *JournalHandler {
	h := &JournalHandler{send: send, attrs: map[string]string{}, mu: &sync.Mutex{}}
	if opts != nil {
		h.opts = *opts
	}
	return h
}

// Enabled reports whether level reaches the handler's minimum level.
func (h *JournalHandler) Enabled(_ context.Context, level slog.Level) bool {
	min := slog.LevelInfo
	if h.opts.Level != nil {
		min = h.opts.Level.Level()
	}
	return level >= min
}

// Handle sends the record.
func (h *JournalHandler) Handle(_ context.Context, r slog.Record) error {
	vars := make(map[string]string, len(h.attrs)+r.NumAttrs()+2)
	for k, v := range h.attrs {
		vars[k] = v
	}
	r.Attrs(func(a slog.Attr) bool {
		addAttr(vars, h.prefix, a)
		return true
	})
	vars["SLOG_LEVEL"] = r.Level.String()
	vars["SYSLOG_IDENTIFIER"] = Identifier
	if h.opts.AddSource && r.PC != 0 {
		vars["CODE_FUNC"] = fmt.Sprintf("%#x", r.PC)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.send(r.Message, priority(r.Level), vars)
}

// WithAttrs returns a handler adding attrs to every record.
func (h *JournalHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := h.clone()
	for _, a := range attrs {
		addAttr(n.attrs, n.prefix, a)
	}
	return n
}

// WithGroup returns a handler prefixing later attributes with the group.
func (h *JournalHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	n := h.clone()
	n.prefix += FieldName(name) + "_"
	return n
}

func (h *JournalHandler) clone() *JournalHandler {
	n := *h
	n.attrs = make(map[string]string, len(h.attrs))
	for k, v := range h.attrs {
		n.attrs[k] = v
	}
	return &n
}

func addAttr(vars map[string]string, prefix string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += FieldName(a.Key) + "_"
		}
		for _, g := range a.Value.Group() {
			addAttr(vars, p, g)
		}
		return
	}
	var v string
	switch a.Value.Kind() {
	case slog.KindTime:
		v = a.Value.Time().UTC().Format(time.RFC3339Nano)
	default:
		v = a.Value.String()
	}
	name := prefix + FieldName(a.Key)
	switch name {
	case "MESSAGE", "PRIORITY", "SYSLOG_IDENTIFIER", "SLOG_LEVEL":
		name = "ATTR_" + name // never overwrite the entry's own fields
	}
	vars[name] = v
}

// Identifier is the SYSLOG_IDENTIFIER of every journal entry, so
// `journalctl -t revgate` finds them whichever unit runs the process.
const Identifier = "revgate"

// FieldName turns an attribute key into a journal field name: upper-case
// letters, digits and underscores, not starting with an underscore or a
// digit (journald reserves those).
func FieldName(key string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(key) {
		switch {
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := strings.TrimLeft(b.String(), "_")
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		s = "F_" + s
	}
	return s
}

func priority(l slog.Level) journal.Priority {
	switch {
	case l >= slog.LevelError:
		return journal.PriErr
	case l >= slog.LevelWarn:
		return journal.PriWarning
	case l >= slog.LevelInfo:
		return journal.PriInfo
	}
	return journal.PriDebug
}

// Package journald is a log/slog handler that writes to the systemd journal
// through its native protocol, with every attribute as a journal field whose
// name is upper-cased: an attribute pod=a.yaml becomes POD=a.yaml, so that
// `journalctl -u revgate-supervise POD=a.yaml` finds a pod's lines.
package journald

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
)

// SendFunc sends one journal entry; journal.Send outside tests.
type SendFunc func(message string, priority journal.Priority, fields map[string]string) error

// Options configure a Handler.
type Options struct {
	// Level is the minimum level sent (default slog.LevelInfo).
	Level slog.Leveler
	// Identifier is SYSLOG_IDENTIFIER (default "revgate").
	Identifier string
	// Send sends an entry (default journal.Send).
	Send SendFunc
}

// Handler is a slog.Handler writing to the journal.
type Handler struct {
	opts   Options
	prefix string // group prefix of attributes added later, e.g. "HTTP_"
	fields map[string]string
}

var _ slog.Handler = (*Handler)(nil)

// New returns a Handler with opts (defaults applied).
func New(opts Options) *Handler {
	if opts.Level == nil {
		opts.Level = slog.LevelInfo
	}
	if opts.Identifier == "" {
		opts.Identifier = "revgate"
	}
	if opts.Send == nil {
		opts.Send = journal.Send
	}
	return &Handler{opts: opts, fields: map[string]string{}}
}

// Enabled reports whether level is at least Options.Level.
func (h *Handler) Enabled(_ context.Context, level slog.Level) bool {
	return level >= h.opts.Level.Level()
}

// Handle sends r as one journal entry.
func (h *Handler) Handle(_ context.Context, r slog.Record) error {
	fields := make(map[string]string, len(h.fields)+r.NumAttrs()+2)
	for k, v := range h.fields {
		fields[k] = v
	}
	r.Attrs(func(a slog.Attr) bool {
		addAttr(fields, h.prefix, a)
		return true
	})
	fields["SYSLOG_IDENTIFIER"] = h.opts.Identifier
	if !r.Time.IsZero() {
		fields["LOG_TIME"] = r.Time.UTC().Format(time.RFC3339Nano)
	}
	return h.opts.Send(r.Message, priority(r.Level), fields)
}

// WithAttrs returns a handler that adds attrs to every entry.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := h.clone()
	for _, a := range attrs {
		addAttr(c.fields, c.prefix, a)
	}
	return c
}

// WithGroup returns a handler that prefixes later attributes with NAME_.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := h.clone()
	c.prefix += FieldName(name) + "_"
	return c
}

func (h *Handler) clone() *Handler {
	c := *h
	c.fields = make(map[string]string, len(h.fields))
	for k, v := range h.fields {
		c.fields[k] = v
	}
	return &c
}

func addAttr(fields map[string]string, prefix string, a slog.Attr) {
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
			addAttr(fields, p, g)
		}
		return
	}
	name := prefix + FieldName(a.Key)
	switch name {
	case "MESSAGE", "PRIORITY", "SYSLOG_IDENTIFIER":
		name = "ATTR_" + name // never overwrite the entry's own fields
	}
	fields[name] = a.Value.String()
}

// FieldName turns an attribute key into a valid journal field name:
// upper case, letters, digits and underscores, starting with a letter.
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
	if s == "" || s[0] >= '0' && s[0] <= '9' {
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
	default:
		return journal.PriDebug
	}
}

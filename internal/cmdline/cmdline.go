// Package cmdline owns the command lines that revgate renders and that its
// commands parse: `revgate proxy` and `revgate monitor`, which the installer
// writes into the static pods, and `revgate install`, which `revgate run`
// calls. Each is a struct whose AddFlags registers the command's flags
// (names, defaults and help are a public contract) bound to its fields, and
// whose Args renders the fields back into arguments that the same AddFlags
// parses into the same values. The command that parses and the installer
// that renders thus cannot disagree on a flag.
//
// The package imports only the standard library and pflag: the commands
// turn its structs into the options of the packages that do the work, and
// the tests of cmd/revgate check that the defaults here are theirs.
package cmdline

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// flagged is a command line or a part of one: a struct whose AddFlags
// registers its flags, bound to its fields, with their defaults.
type flagged[T any] interface {
	*T
	AddFlags(fs *pflag.FlagSet)
}

// Part is a part of a command line that ParseProxyPart can read on its own.
type Part interface {
	AddFlags(fs *pflag.FlagSet)
}

// Arg renders one flag as the single argument "--name=value", which reads
// back as value whatever it holds (a leading dash, spaces, an empty string).
func Arg(name, value string) string {
	return "--" + name + "=" + value
}

func newFlagSet() *pflag.FlagSet {
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	return fs
}

// defaults returns a T holding the defaults its AddFlags registers.
func defaults[T any, P flagged[T]]() T {
	var v T
	P(&v).AddFlags(newFlagSet())
	return v
}

// render returns the arguments that set v's flags: those named in pinned
// whatever their values, and every other one whose value differs from its
// default; in the order AddFlags registers them, a list flag as one
// argument per element.
func render[T any, P flagged[T]](v T, pinned ...string) []string {
	// The flags are registered on bound, so that they hold its fields;
	// setting bound to v makes them report v's values, and their DefValue
	// is the default they were registered with.
	var bound T
	fs := newFlagSet()
	P(&bound).AddFlags(fs)
	bound = v
	var args []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Value.String() == f.DefValue && !slices.Contains(pinned, f.Name) {
			return
		}
		if list, ok := f.Value.(pflag.SliceValue); ok {
			for _, e := range list.GetSlice() {
				args = append(args, Arg(f.Name, e))
			}
			return
		}
		args = append(args, Arg(f.Name, f.Value.String()))
	})
	return args
}

// flagNames returns the names of the flags that add registers.
func flagNames(add func(*pflag.FlagSet)) []string {
	fs := newFlagSet()
	add(fs)
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	return names
}

// parse parses args as a command whose flags T registers and which takes
// no positional arguments.
func parse[T any, P flagged[T]](args []string) (T, error) {
	var v T
	fs := newFlagSet()
	P(&v).AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return v, err
	}
	if fs.NArg() > 0 {
		return v, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return v, nil
}

// parsePart reads from args, the arguments of a command whose flags all
// registers, just the flags that parts register, into the parts. Every other
// flag of the command is skipped with its value, and so is a flag the
// command does not know; a value of a part's flag that does not parse is
// reported in the error and skipped, and the arguments after it are read
// all the same (the last good value wins). Fields whose flags are not given
// keep their defaults.
func parsePart(args []string, all func(*pflag.FlagSet), parts []Part) error {
	var bad []error
	fs := newFlagSet()
	fs.ParseErrorsAllowlist.UnknownFlags = true
	own := newFlagSet()
	for _, p := range parts {
		p.AddFlags(own)
	}
	own.VisitAll(func(f *pflag.Flag) {
		g := *f
		g.Value = lenientValue{Value: f.Value, name: f.Name, bad: &bad}
		fs.AddFlag(&g)
	})
	others := newFlagSet()
	all(others)
	fs.SetNormalizeFunc(others.GetNormalizeFunc())
	others.VisitAll(func(f *pflag.Flag) {
		if fs.Lookup(f.Name) != nil {
			return
		}
		// Known, so that its value is skipped as the command would take it
		// (a boolean flag takes none); never stored.
		g := *f
		g.Value = skippedValue{f.Value}
		fs.AddFlag(&g)
	})
	if err := fs.Parse(args); err != nil {
		bad = append(bad, err)
	}
	return errors.Join(bad...)
}

// lenientValue stores the values that parse and collects the errors of
// those that do not, without stopping the parse; a value that does not
// parse leaves the one before (pflag's own values may not).
type lenientValue struct {
	pflag.Value
	name string
	bad  *[]error
}

func (v lenientValue) Set(s string) error {
	var restore func()
	if list, ok := v.Value.(pflag.SliceValue); ok {
		prev := list.GetSlice()
		restore = func() { _ = list.Replace(prev) }
	} else {
		prev := v.Value.String()
		restore = func() { _ = v.Value.Set(prev) }
	}
	if err := v.Value.Set(s); err != nil {
		restore()
		*v.bad = append(*v.bad, fmt.Errorf("invalid argument %q for --%s: %w", s, v.name, err))
	}
	return nil
}

// skippedValue accepts any value and stores none.
type skippedValue struct{ pflag.Value }

func (skippedValue) Set(string) error { return nil }

// stringValue is a string flag shown in help as typ. When allowed is set,
// other values are refused as an invalid what.
type stringValue struct {
	p        *string
	typ      string
	what     string
	allowed  []string
	listText string
}

func newStringValue(p *string, def, typ string) stringValue {
	*p = def
	return stringValue{p: p, typ: typ}
}

func newChoiceValue(p *string, def, typ, what string, allowed ...string) stringValue {
	v := newStringValue(p, def, typ)
	v.what, v.allowed = what, allowed
	v.listText = strings.Join(allowed[:len(allowed)-1], ", ") + " or " + allowed[len(allowed)-1]
	return v
}

func (v stringValue) String() string { return *v.p }
func (v stringValue) Type() string   { return v.typ }
func (v stringValue) Set(s string) error {
	if v.allowed != nil && !slices.Contains(v.allowed, s) {
		return fmt.Errorf("invalid %s %q: want %s", v.what, s, v.listText)
	}
	*v.p = s
	return nil
}

// addFlagAliases makes fs accept other spellings of some of its flags: each
// alias parses as the flag it names, with the same meaning, and stays out of
// --help (the README lists them). The commands use it for the spellings of
// OpenShift's library-go installer and startup monitor, so that an
// operator's existing command lines work unchanged.
func addFlagAliases(fs *pflag.FlagSet, aliases map[string]string) {
	prev := fs.GetNormalizeFunc()
	fs.SetNormalizeFunc(func(f *pflag.FlagSet, name string) pflag.NormalizedName {
		if canonical, ok := aliases[name]; ok {
			name = canonical
		}
		return prev(f, name)
	})
}

// DefaultNodeName is the default of --node-name: $NODE_NAME, which
// library-go's installer pod is given through the downward API, else the
// host name.
func DefaultNodeName() string {
	if n := os.Getenv("NODE_NAME"); n != "" {
		return n
	}
	host, _ := os.Hostname()
	return host
}

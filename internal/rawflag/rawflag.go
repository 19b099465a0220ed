// Package rawflag reads a flag's value from an argument list without a flag
// set: for arguments that are passed through to another command (the
// installer reading the proxy's --admin-addr) or that failed to parse (the
// proxy recording a flag error in its termination log).
package rawflag

import "strings"

// Last returns the last value of --name in args, written "--name=v" or
// "--name v", as flag parsing keeps the last one; ok is false when args do
// not set it. Arguments after "--" are not flags.
func Last(args []string, name string) (value string, ok bool) {
	flag := "--" + name
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		if v, found := strings.CutPrefix(a, flag+"="); found {
			value, ok = v, true
		} else if a == flag && i+1 < len(args) {
			value, ok = args[i+1], true
			i++
		}
	}
	return value, ok
}

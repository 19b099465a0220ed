package main

import (
	"github.com/spf13/pflag"

	"github.com/revgate/revgate/internal/cmdline"
	"github.com/revgate/revgate/revisions"
)

// addLayoutFlags registers the layout flags of cmdline.Layout, as asked,
// bound to l in place: the two structs have the same fields, so a pointer to
// one converts to a pointer to the other (and stops compiling should they
// ever differ). Empty values are defaulted later by revisions.Layout.Defaulted.
func addLayoutFlags(fs *pflag.FlagSet, l *revisions.Layout, with cmdline.LayoutFlags) {
	(*cmdline.Layout)(l).AddFlags(fs, with)
}

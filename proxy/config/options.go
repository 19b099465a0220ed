package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/revgate/revgate/proxy/model"
)

// Defaults of Options.
const (
	// DefaultIngressClass is the ingress class revgate serves by default.
	DefaultIngressClass = "revgate"
	// DefaultNamespace is the namespace of objects without one and of Secrets
	// read from secrets/<name>/ folders.
	DefaultNamespace = "default"
	// ControllerName is the spec.controller of IngressClasses served by revgate.
	ControllerName = "revgate.io/ingress-controller"
)

// Options configure loading and translation; shared by `revgate proxy`,
// `revgate validate` and the installer's validation, whose flags
// (internal/cmdline) say them.
type Options struct {
	// Dirs are the folders to load (--config-dir, repeatable): a revision
	// folder (holding configmaps/ or secrets/) or a plain folder of YAML/JSON
	// files.
	Dirs []string
	// IngressClass is the ingress class served (--ingress-class); default "revgate".
	IngressClass string
	// Namespace is the namespace of Secrets read from secrets/<name>/ folders
	// (--namespace); default "default".
	Namespace string
	// RootNamespaces restricts IngressRoute roots to these namespaces
	// (--root-namespaces); empty allows roots anywhere.
	RootNamespaces []string
	// Fallback is the object-level fallback mode (--fallback); default exclude.
	Fallback model.FallbackMode
	// LastKnownGoodDir is the revision folder used for backfill
	// (--last-known-good-dir). Empty: resolved through
	// <resource-dir>/<t>-last-known-good when Dirs[0] is a revision folder
	// <resource-dir>/<t>-pod-<N>.
	LastKnownGoodDir string
	// Revision is stamped into Snapshot.Revision (0 when unknown).
	Revision int
	// ConfigTime is when the configuration counts as applied: the start of a
	// timed canary rollout that gives none (Kong's "now"). Zero: Build takes
	// the install time of the revision when Dirs[0] is a revision folder
	// (revgate.io/installed-at on its operand manifest), which every process
	// of that revision shares, restarts and retries included; else the moment
	// Build runs.
	ConfigTime time.Time
}

func (o *Options) setDefaults() {
	if o.IngressClass == "" {
		o.IngressClass = DefaultIngressClass
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Fallback == "" {
		o.Fallback = model.FallbackExclude
	}
}

// Validate checks the options, filling in defaults for empty fields.
func (o *Options) Validate() error {
	o.setDefaults()
	var errs []error
	if len(o.Dirs) == 0 {
		errs = append(errs, errors.New("no configuration folder given (--config-dir)"))
	}
	if _, err := model.ParseFallbackMode(string(o.Fallback)); err != nil {
		errs = append(errs, err)
	}
	if o.Revision < 0 {
		errs = append(errs, fmt.Errorf("invalid revision %d", o.Revision))
	}
	return errors.Join(errs...)
}

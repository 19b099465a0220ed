package installer

import "context"

// Validator checks a configuration before anything of it is written. dir is a
// staged copy laid out like a revision folder (configmaps/<name>/<key>,
// secrets/<name>/<key>). Warnings are printed, or refuse the install with
// Options.Strict; an error refuses the install.
type Validator interface {
	Validate(ctx context.Context, dir string) (warnings []string, err error)
}

// ValidatorFunc adapts a function to Validator.
type ValidatorFunc func(ctx context.Context, dir string) ([]string, error)

// Validate calls f.
func (f ValidatorFunc) Validate(ctx context.Context, dir string) ([]string, error) {
	return f(ctx, dir)
}

// NopValidator accepts every configuration (after staging a copy for it).
var NopValidator Validator = ValidatorFunc(func(context.Context, string) ([]string, error) { return nil, nil })

var _ Validator = ValidatorFunc(nil)

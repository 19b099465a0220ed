package controller

import (
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// ApplyDeploy applies a file of deploy/controller with the admin
// configuration cfg, for the tests of package controller_test (which may
// import packages that import this one, such as controller/rollout).
func ApplyDeploy(t *testing.T, cfg *rest.Config, name string) {
	t.Helper()
	apply(t, clientsFor(t, cfg), readDeploy(t, name))
}

// ReadDeploy reads a file of deploy/controller.
func ReadDeploy(t *testing.T, name string) []byte {
	t.Helper()
	return readDeploy(t, name)
}

// WaitFor is waitFor, for the tests of package controller_test.
func WaitFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	waitFor(t, d, what, cond)
}

package controller

import (
	"testing"

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

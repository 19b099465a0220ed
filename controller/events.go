package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/revgate/revgate/installer"
)

// Event reasons about objects, after Kong's: a broken object is
// ConfigurationTranslationFailed (Kong's KongConfigurationTranslationFailed),
// and the object-level fallback's decisions name themselves.
const (
	// EventTranslationFailed: the object has an error; the gateway leaves it
	// out (Warning).
	EventTranslationFailed = "ConfigurationTranslationFailed"
	// EventFallbackExcluded: the object is left out with the broken objects
	// it depends on (Warning).
	EventFallbackExcluded = "FallbackConfigurationExcluded"
	// EventFallbackBackfilled: the gateway serves the object's version from
	// the last-known-good revision (Warning).
	EventFallbackBackfilled = "FallbackConfigurationBackfilled"
	// EventFallbackSucceeded: the served revision applies a fallback
	// configuration (Normal, on the mirror pod; Kong's
	// FallbackKongConfigurationSucceeded).
	EventFallbackSucceeded = "FallbackConfigurationSucceeded"
)

// eventScheme resolves the references of Events.
var eventScheme = scheme.Scheme

// targetRef is the operand's mirror pod, <target>-<node> in the static
// pods' namespace, where the installer and the monitor record their Events
// too.
func (c *Controller) targetRef() *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: "v1",
		Kind:       "Pod",
		Namespace:  installer.PodNamespace,
		Name:       c.opts.Layout.Target + "-" + c.opts.NodeName,
	}
}

// targetEvent records an Event about the revisions on the mirror pod.
func (c *Controller) targetEvent(eventType, reason, message string) {
	c.recorder.Event(c.targetRef(), eventType, reason, message)
}

// targetSink lets the installer record its RevisionInstalled Event through
// the controller's recorder.
type targetSink struct{ c *Controller }

var _ installer.EventSink = targetSink{}

// Emit records the Event.
func (s targetSink) Emit(_ context.Context, eventType, reason, message string) error {
	s.c.targetEvent(eventType, reason, message)
	return nil
}

// eventKey identifies an object an Event was recorded about: its kind and
// uid (a deleted and recreated object is another object).
type eventKey struct {
	kind string
	uid  types.UID
}

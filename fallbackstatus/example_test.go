package fallbackstatus_test

import (
	"fmt"

	"github.com/revgate/revgate/fallbackstatus"
)

// An operator reads the annotations of a mirror pod and reports Degraded.
func Example() {
	annotations := map[string]string{
		"startup-monitor.static-pods.openshift.io/fallback-for-revision": "5",
		"startup-monitor.static-pods.openshift.io/fallback-reason":       "NotReady",
		"startup-monitor.static-pods.openshift.io/fallback-message":      "readyz checks failing: [-]config failed: not loaded",
		"revgate.io/fallback-time":                                       "2026-11-22T00:05:00Z",
		"revgate.io/fallback-attempt":                                    "1",
		"revgate.io/fallback-to-revision":                                "4",
		"revgate.io/next-retry":                                          "2026-11-22T00:15:00Z",
	}
	f, err := fallbackstatus.Parse(annotations)
	if err != nil {
		fmt.Println("malformed:", err)
		return
	}
	c := fallbackstatus.DegradedCondition(f)
	fmt.Println(c.Type, c.Status, c.Reason)
	fmt.Println(c.Message)

	none, _ := fallbackstatus.Parse(map[string]string{"revision": "5"})
	fmt.Println(fallbackstatus.DegradedCondition(none).Status)
	// Output:
	// Degraded True NotReady
	// revision 5 failed with NotReady, serving revision 4; retry at 2026-11-22T00:15:00Z: readyz checks failing: [-]config failed: not loaded
	// False
}

package fallbackstatus_test

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/revgate/revgate/fallbackstatus"
)

// An operator lists a node's mirror pods of the target by label
// (app=revgate) and reads the fallback from the one that serves: while a
// retry of revision 5 runs beside it, revision 4 still serves and says why.
func ExampleForNode() {
	pods := []metav1.ObjectMeta{
		{Name: "revgate-b-node1", Labels: map[string]string{"app": "revgate", "revision": "5", "revgate.io/slot": "b"}},
		{Name: "revgate-node1", Labels: map[string]string{"app": "revgate", "revision": "4", "revgate.io/slot": "a"},
			Annotations: map[string]string{
				"startup-monitor.static-pods.openshift.io/fallback-for-revision": "5",
				"startup-monitor.static-pods.openshift.io/fallback-reason":       "NotReady",
				"startup-monitor.static-pods.openshift.io/fallback-message":      "readyz checks failing",
			}},
	}
	objs := []*metav1.ObjectMeta{&pods[0], &pods[1]}
	serving, _ := fallbackstatus.ServingPod(objs)
	f, _ := fallbackstatus.ForNode(objs)
	fmt.Println(serving.Name, f.Summary())
	// Output:
	// revgate-node1 revision 5 failed with NotReady, serving the previous revision
}

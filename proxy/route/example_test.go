package route_test

import (
	"fmt"

	"github.com/revgate/revgate/proxy/route"
)

func ExampleNormalizePath() {
	p, err := route.NormalizePath("/public/%2e%2e/admin/x", route.PathOptions{})
	fmt.Println(p, err)
	_, err = route.NormalizePath("/public/..%2fadmin", route.PathOptions{})
	fmt.Println(err)
	// Output:
	// /admin/x <nil>
	// invalid request path: encoded slash (%2F)
}

// Command freeport prints N free TCP ports on 127.0.0.1, one a line, for the
// test node's servers. The ports are released before it exits, so a port may
// be taken again in between: callers bind them soon after.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
)

func main() {
	n := flag.Int("n", 1, "how many ports")
	flag.Parse()
	var ls []net.Listener
	for range *n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, "freeport:", err)
			os.Exit(1)
		}
		ls = append(ls, l)
		fmt.Println(l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
}

// Command upstream is the benchmark's backend: it answers every request with
// 200 and a 64-byte body, keeping connections alive.
package main

import (
	"flag"
	"log"
	"net/http"
	"strconv"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:19000", "listen address")
	flag.Parse()
	body := []byte("revgate-bench-upstream-answer-0123456789abcdefghijklmnopqrstuvw\n")
	if len(body) != 64 {
		log.Fatalf("body is %d bytes, want 64", len(body))
	}
	length := strconv.Itoa(len(body))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr := w.Header()
		hdr["Content-Type"] = []string{"text/plain"}
		hdr["Content-Length"] = []string{length}
		w.Write(body)
	})
	log.Fatal((&http.Server{Addr: *addr, Handler: h}).ListenAndServe())
}

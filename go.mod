module github.com/revgate/revgate

go 1.26.8

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/coreos/go-systemd/v22 v22.7.0 // indirect
	github.com/fsnotify/fsnotify v1.10.1 // indirect
	github.com/gofrs/flock v0.13.1 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/spf13/cobra v1.10.2 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	k8s.io/api v0.31.4 // indirect
	k8s.io/apimachinery v0.31.4 // indirect
	k8s.io/client-go v0.31.4 // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
)

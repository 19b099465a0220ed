module github.com/revgate/revgate/hack/node/tools

go 1.26

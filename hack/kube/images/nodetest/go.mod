module github.com/celkeeper/celkeeper/hack/kube/images/nodetest

go 1.26.0

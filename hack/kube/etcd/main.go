// Command etcd is etcd's own server main, built from go.etcd.io/etcd/server/v3 for celkeeper's tests.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }

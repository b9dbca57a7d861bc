// etcd for the control-plane test suite: etcd's own entry point (etcdmain.Main), built from the
// go.etcd.io/etcd/server/v3 module at the version Kubernetes' etcd client is pinned to.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}

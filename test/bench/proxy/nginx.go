package main

import (
	"path/filepath"

	"github.com/herdgate/herdgate/test/testenv"
)

// startNginx starts an nginx serving the given server blocks from its own directory under dir, and
// returns how to stop it and its process group.
func startNginx(dir, name, servers string) (stop func(), pgid int, err error) {
	n, err := testenv.StartNginx(filepath.Join(dir, name), servers)
	if err != nil {
		return nil, 0, err
	}
	return n.Stop, n.PGID(), nil
}

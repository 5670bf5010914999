package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// GuideBlock is the code block of language lang in docs/guides/gateways.md, with the placeholders
// filled in by fill: the gateway's address (LISTEN_ADDRESS), herdgate's (HERDGATE_ADDRESS), the
// workload's (WORKLOAD_ADDRESS), the folder of the published pass keys (KEYS_DIR) and the queue's
// name (QUEUE_NAME).
func GuideBlock(lang string, fill *strings.Replacer) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	guide, err := os.ReadFile(filepath.Join(root, "docs", "guides", "gateways.md"))
	if err != nil {
		return "", err
	}
	_, block, found := strings.Cut(string(guide), "```"+lang+"\n")
	block, _, closed := strings.Cut(block, "```")
	if !found || !closed {
		return "", fmt.Errorf("docs/guides/gateways.md has no %s block", lang)
	}
	return fill.Replace(block), nil
}

// GuideGateway is a gateway started with the guide's own configuration.
type GuideGateway struct {
	// Stop stops it; Log is its log file.
	Stop func()
	Log  string
}

// StartGuideGateway starts nginx or Traefik in dir with docs/guides/gateways.md's configuration:
// listening on listen, asking herdgate at herdgate and forwarding to the workload at workload (each
// host:port).
func StartGuideGateway(kind, dir, listen, herdgate, workload string) (*GuideGateway, error) {
	fill := strings.NewReplacer("LISTEN_ADDRESS", listen, "HERDGATE_ADDRESS", herdgate, "WORKLOAD_ADDRESS", workload)
	block := func(lang string) string {
		b, err := GuideBlock(lang, fill)
		if err != nil {
			panic(err) // the guide is part of the tree; a missing block is a bug in it
		}
		return b
	}
	switch kind {
	case "nginx":
		n, err := StartNginx(dir, block("nginx"))
		if err != nil {
			return nil, err
		}
		return &GuideGateway{Stop: n.Stop, Log: filepath.Join(dir, "nginx-error.log")}, nil
	case "traefik":
		t, err := StartTraefik(dir, block("yaml traefik-static"), block("yaml traefik-dynamic"))
		if err != nil {
			return nil, err
		}
		return &GuideGateway{Stop: t.Stop, Log: filepath.Join(dir, "traefik.log")}, nil
	}
	return nil, fmt.Errorf("no gateway %q: nginx or traefik", kind)
}

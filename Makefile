# herdgate — make help lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

# Everything the Makefile installs lands in bin/ (git-ignored), so a second run reuses it.
LOCALBIN ?= $(CURDIR)/bin
ARTIFACTS ?= $(CURDIR)/_artifacts

# The Kubernetes version of the control plane and the node is the one of the client libraries in go.mod:
# k8s.io/api v0.X.Y is Kubernetes 1.X.Y. Nothing else names it.
KUBE_VERSION ?= $(shell go list -m -f '{{.Version}}' k8s.io/api | sed -e 's/^v0\./1./')
CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION ?= v2.15.0
GOTESTSUM_VERSION ?= v1.13.0

ENVTEST_ASSETS ?= $(LOCALBIN)/k8s/$(KUBE_VERSION)
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
GOTESTSUM ?= $(LOCALBIN)/gotestsum-$(GOTESTSUM_VERSION)
HELM_VERSION ?= v3.22.0
HELM ?= $(LOCALBIN)/helm-$(HELM_VERSION)

# The whole suite; CI gives it 90 minutes, it should finish well under 30 once the toolchain is cached.
TEST_TIMEOUT ?= 25m
TEST_FLAGS ?=
BENCHTIME ?= 3s
# bench-far: the depth of its queue and how long each path is polled.
FAR_DEPTH ?= 10000000
FAR_DURATION ?= 20s
FUZZTIME ?= 2m
# make test fuzzes for a count of inputs, not a duration: Go 1.26's fuzzer may fail a duration's run
# with a bare "context deadline exceeded" when a worker is busy as the time runs out, on a loaded machine
# (go.dev/issue/75804, fixed in Go 1.27). About 5 s each here.
TEST_FUZZTIME ?= 100000x
SCHEDULER_DURATION ?= 30s
BENCH_PROXY_DURATION ?= 5s
PKGS ?= ./...

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate the deepcopy functions of the API types.
	$(CONTROLLER_GEN) object paths="./api/..."

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD and the manager's RBAC from the Go markers, and copy them into the chart.
	$(CONTROLLER_GEN) crd rbac:roleName=manager-role paths="./..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	hack/sync-chart.sh
	go run ./hack/crd-docs config/crd/bases/herdgate.io_waitingqueues.yaml docs/reference/waitingqueue.md
	cp admission/openapi.json docs/reference/openapi.json

.PHONY: fmt
fmt: ## Format the Go code.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet (also with the keycheck tag the tests build with).
	go vet ./...
	go vet -tags keycheck ./internal/queue

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint.
	$(GOLANGCI_LINT) run ./...

# What make generate, make manifests and go mod tidy write, and make verify holds to what is committed.
GENERATED := go.mod go.sum api config charts docs/reference internal/settings/waitingqueues.herdgate.io.yaml

.PHONY: verify
verify: generate manifests ## Regenerate everything and fail if the tree differs from what is committed.
	go mod tidy
	@if [ -n "$$(git status --porcelain --untracked-files=all -- $(GENERATED))" ]; then \
		git status --porcelain --untracked-files=all -- $(GENERATED); \
		git --no-pager diff --stat -- $(GENERATED); \
		echo "verify: generated files are not current; run 'make generate manifests' and 'go mod tidy' and commit the result"; \
		exit 1; \
	fi
	@echo "verify: generated files are current"
	@big="$$(git ls-files -z | xargs -0 -r stat -c '%s %n' 2>/dev/null | awk '$$1 > 2097152 {print $$2}')"; \
	if [ -n "$$big" ]; then \
		echo "verify: files of over 2 MiB are tracked (build output?): $$big"; \
		exit 1; \
	fi

##@ Demo

.PHONY: demo
demo: envtest build $(HELM) ## Run a waiting room on a real single-node cluster (or locally) and send a herd through it (ARGS="--once", "--gateway nginx|traefik").
	hack/ensure-packages.sh redis-server=redis-server redis-cli=redis-tools
	go build -o $(LOCALBIN)/demo ./test/demo
	HERDGATE_HELM=$(HELM) test/demo/run.sh $(ARGS)

##@ Build

.PHONY: build
build: generate ## Build the binaries into bin/: manager, herdgate-proxy, herd, kubectl-herdgate.
	@hack/go-build.sh $(LOCALBIN)/manager ./cmd/manager -trimpath
	@hack/go-build.sh $(LOCALBIN)/herdgate-proxy ./cmd/herdgate-proxy -trimpath
	@hack/go-build.sh $(LOCALBIN)/herd ./cmd/herd -trimpath
	@hack/go-build.sh $(LOCALBIN)/kubectl-herdgate ./cmd/kubectl-herdgate -trimpath

IMG ?= ghcr.io/herdgate/herdgate:0.1.0
CONTAINER_TOOL ?= docker

.PHONY: docker-build
docker-build: ## Build the image (manager and proxy) with a container engine: make docker-build IMG=<image>.
	$(CONTAINER_TOOL) build -t $(IMG) .

##@ Node

IMAGES ?= $(LOCALBIN)/images
REDIS_IMAGE ?= docker.io/library/redis:7.2-alpine
PAUSE_IMAGE ?= registry.k8s.io/pause:3.10
WORKLOAD_IMAGE ?= ghcr.io/herdgate/herd:0.1.0

.PHONY: images
images: build ## Build OCI image archives into bin/images/ without a container engine (herdgate, pause, Redis, the workload).
	hack/ensure-packages.sh redis-server=redis-server
	@mkdir -p $(IMAGES)
	@CGO_ENABLED=0 hack/go-build.sh $(IMAGES)/manager ./cmd/manager -trimpath -ldflags="-s -w"
	@CGO_ENABLED=0 hack/go-build.sh $(IMAGES)/herdgate-proxy ./cmd/herdgate-proxy -trimpath -ldflags="-s -w"
	@CGO_ENABLED=0 hack/go-build.sh $(IMAGES)/herd ./cmd/herd -trimpath -ldflags="-s -w"
	@CGO_ENABLED=0 hack/go-build.sh $(IMAGES)/pause ./hack/ociimage/pause -trimpath -ldflags="-s -w"
	@echo "==> writing the OCI image archives into $(IMAGES)"
	go run ./hack/ociimage -o $(IMAGES)/herdgate.tar -name $(IMG) -nonroot -ca-bundle /etc/ssl/certs/ca-certificates.crt \
		-add /manager=$(IMAGES)/manager -add /herdgate-proxy=$(IMAGES)/herdgate-proxy -user 65532:65532 -entrypoint /manager
	go run ./hack/ociimage -o $(IMAGES)/pause.tar -name $(PAUSE_IMAGE) -add /pause=$(IMAGES)/pause -user 65535:65535 -entrypoint /pause
	go run ./hack/ociimage -o $(IMAGES)/herd.tar -name $(WORKLOAD_IMAGE) -nonroot -add /herd=$(IMAGES)/herd -user 65532:65532 -entrypoint /herd
	@# Debian's redis-server with its libraries; the upstream image builds protected mode off, so this one does too.
	go run ./hack/ociimage -o $(IMAGES)/redis.tar -name $(REDIS_IMAGE) -with-libs -workdir /data -dir /data:1777 \
		-add /usr/local/bin/redis-server=$$(readlink -f $$(command -v redis-server)) \
		-entrypoint "/usr/local/bin/redis-server --protected-mode no"
	@ls -l $(IMAGES)/*.tar

.PHONY: node-up
node-up: images ## Start a real single-node cluster in a network namespace of its own (root, Linux); builds what is missing.
	hack/node.sh start

.PHONY: node-down
node-down: ## Stop the node and remove its processes, namespace, cgroups and state.
	hack/node.sh stop

##@ Test

.PHONY: toolchain
toolchain: envtest $(CONTROLLER_GEN) $(GOTESTSUM) $(HELM) ## Install what the tests need (control plane, Redis, gateways, tools).
	hack/setup-traefik.sh $(LOCALBIN)
	hack/ensure-packages.sh redis-server=redis-server redis-cli=redis-tools redis-benchmark=redis-tools redis-sentinel=redis-sentinel chromium=chromium nginx=nginx-light caddy=caddy haproxy=haproxy \
		promtool=prometheus prometheus=prometheus /usr/share/fonts/truetype/nanum/NanumGothic.ttf=fonts-nanum

.PHONY: envtest
envtest: ## Build etcd, kube-apiserver and kubectl into bin/k8s/ unless they are there.
	hack/setup-envtest.sh $(LOCALBIN)/k8s

.PHONY: test
test: toolchain generate manifests vet lint ## Install what is missing, then run every test and print a summary.
	@mkdir -p $(ARTIFACTS)
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) HERDGATE_ARTIFACTS=$(ARTIFACTS) HERDGATE_HELM=$(HELM) \
		$(GOTESTSUM) --format pkgname-and-test-fails --junitfile $(ARTIFACTS)/junit.xml -- \
		-timeout $(TEST_TIMEOUT) -count=1 -tags keycheck $(TEST_FLAGS) $(PKGS)
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(TEST_FUZZTIME)
	$(MAKE) --no-print-directory test-node

.PHONY: test-node
test-node: images $(GOTESTSUM) $(HELM) ## Start the node, drill the chart's pods under faults, stop the node (skips where it cannot run).
	HERDGATE_HELM=$(HELM) GOTESTSUM=$(GOTESTSUM) test/node/run.sh

.PHONY: fuzz
fuzz: ## Fuzz the pass parser and the path normaliser for FUZZTIME each (make test runs them briefly).
	@for target in FuzzVerifyPass:./internal/pass FuzzNormalize:./internal/route; do \
		echo "fuzzing $${target%%:*} for $(FUZZTIME)"; \
		go test -run '^$$' -fuzz "^$${target%%:*}\$$" -fuzztime $(FUZZTIME) "$${target#*:}" || exit 1; \
	done

##@ Benchmarks

.PHONY: bench-queue
bench-queue: toolchain ## Benchmark the queue engine beside redis-benchmark on one redis-server; print ratios.
	@mkdir -p $(ARTIFACTS)
	@echo "[bench-queue] Enter and Status (each with redis-benchmark right after it), Admit ticks, memory, a draw of 10^6; raw output in $(ARTIFACTS)/bench-queue.txt"
	go test -run '^$$' -bench 'Enter|Status|Admit14|AdmitLimit' -benchtime $(BENCHTIME) -benchmem -count 1 ./internal/queue | tee $(ARTIFACTS)/bench-queue.txt
	go test -run '^$$' -bench 'MemoryPerWaitingVisitor' -benchtime 1x -count 1 ./internal/queue | tee -a $(ARTIFACTS)/bench-queue.txt
	@echo "[bench-queue] drawing a pre-queue of 10^6 (about 2 minutes)"
	go test -run '^$$' -bench 'DrawPreQueue' -benchtime 1x -count 1 -timeout 20m ./internal/queue | tee -a $(ARTIFACTS)/bench-queue.txt
	go run ./test/bench/queue < $(ARTIFACTS)/bench-queue.txt

.PHONY: bench-far
bench-far: toolchain ## Build a queue of 10^7 waiting; poll it at the default budget through a real proxy, per poll and with places.
	@mkdir -p $(ARTIFACTS)
	@echo "[bench-far] filling $(FAR_DEPTH) visitors through the engine (10^7: about 4 minutes and 2 GB of Redis), then 2 x $(FAR_DURATION) of polls"
	go test -run '^$$' -bench 'DeepQueuePolls' -benchtime 1x -count 1 -timeout 60m ./admission -args -far.depth=$(FAR_DEPTH) -far.duration=$(FAR_DURATION) | tee $(ARTIFACTS)/bench-far.txt

.PHONY: bench-scheduler
bench-scheduler: toolchain ## Run ten reference queues for 30 s, 300 idle rooms ticking and sleeping, 100 busy among 900 idle on an aligned and a phased grid.
	go test -run '^$$' -bench 'SchedulerTenQueues|IdleRooms|BusyAmongIdleRooms' -benchtime 1x ./internal/scheduler -args -scheduler.duration=$(SCHEDULER_DURATION)

MANAGER_LOAD_PHASE ?= 30s
# bench-rooms: the room counts reached one after the other, how long each is watched idle and busy, and
# a commit whose manager is measured the same way first (none by default), at its own counts, a
# directory for CPU profiles of the manager over each window (none by default), and more flags for
# this build's manager (none by default).
BENCH_ROOMS_LEVELS ?= 100,1000,10000
BENCH_ROOMS_IDLE ?= 4m
BENCH_ROOMS_BUSY ?= 30s
BENCH_ROOMS_BASELINE ?=
BENCH_ROOMS_BASELINE_LEVELS ?= 100,1000
BENCH_ROOMS_PROFILES ?=
BENCH_ROOMS_MANAGER_ARGS ?=

.PHONY: bench-manager
bench-manager: toolchain ## Run the manager beside the largest plans for two phases; report memory, CPU and tick lag.
	@mkdir -p $(ARTIFACTS)
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) HERDGATE_ARTIFACTS=$(ARTIFACTS) go test -count=1 -v -run '^TestManagerUnderTheLargestPlans$$' \
		./test/e2e -args -manager-load.phase=$(MANAGER_LOAD_PHASE) | grep -E '^\s+\||RSS|^(--- |ok|FAIL)'

.PHONY: bench-rooms
bench-rooms: toolchain ## Run the manager at 100, 1,000 and 10,000 rooms (envtest): made at once, idle, a tenth busy (at most 100); BENCH_ROOMS_BASELINE=<commit> measures that one first.
	@mkdir -p $(ARTIFACTS)
	go build -o $(LOCALBIN)/bench-rooms/manager ./cmd/manager
	go build -o $(LOCALBIN)/bench-rooms/herdgate-proxy ./cmd/herdgate-proxy
	$(if $(BENCH_ROOMS_BASELINE),hack/build-at.sh $(BENCH_ROOMS_BASELINE) ./cmd/manager $(LOCALBIN)/bench-rooms/manager-baseline)
	@echo "[bench-rooms] about an hour for the default counts (ten minutes at 1,000 alone), plus the baseline's; progress on stderr, report in $(ARTIFACTS)/bench-rooms.md"
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) go run ./test/bench/rooms --manager=$(LOCALBIN)/bench-rooms/manager --proxy=$(LOCALBIN)/bench-rooms/herdgate-proxy \
		$(if $(BENCH_ROOMS_BASELINE),--baseline=$(LOCALBIN)/bench-rooms/manager-baseline --baseline-levels=$(BENCH_ROOMS_BASELINE_LEVELS)) \
		--levels=$(BENCH_ROOMS_LEVELS) --idle=$(BENCH_ROOMS_IDLE) --busy=$(BENCH_ROOMS_BUSY) --out=$(ARTIFACTS)/bench-rooms.md \
		$(if $(BENCH_ROOMS_PROFILES),--profiles=$(BENCH_ROOMS_PROFILES)) $(if $(BENCH_ROOMS_MANAGER_ARGS),--manager-args="$(BENCH_ROOMS_MANAGER_ARGS)")

.PHONY: bench-pow
bench-pow: toolchain ## Time the proof of work at each difficulty: Go (API clients) beside the waiting page in headless Chromium.
	@mkdir -p $(ARTIFACTS)
	go test -run '^$$' -bench 'BenchmarkSolve$$' -benchtime 20x -count 1 ./admission | tee $(ARTIFACTS)/bench-pow.txt
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) go test -run '^$$' -bench 'BenchmarkSolveInTheBrowser' -benchtime 5x -count 1 ./test/e2e | tee -a $(ARTIFACTS)/bench-pow.txt

.PHONY: bench-proxy
bench-proxy: toolchain ## herdgate-proxy vs nginx proxy_pass vs direct (wrk, loopback); status polls vs ZRANK; a flood of early polls.
	hack/ensure-packages.sh wrk=wrk nginx=nginx-light haproxy=haproxy
	@mkdir -p $(ARTIFACTS)
	go build -trimpath -o $(LOCALBIN)/herdgate-proxy ./cmd/herdgate-proxy
	go run ./test/bench/proxy --proxy=$(LOCALBIN)/herdgate-proxy $(if $(BENCH_PROXY_BASELINE),--baseline=$(BENCH_PROXY_BASELINE)) --duration=$(BENCH_PROXY_DURATION) --out=$(ARTIFACTS)/bench-proxy.md
	go test -run '^$$' -bench 'VerifyPass' -benchmem ./internal/pass
	go test -run '^$$' -bench 'Normalize' -benchmem ./internal/route

.PHONY: bench-gateway
bench-gateway: toolchain ## bench-proxy with the gateways: nginx + auth_request, HAProxy + jwt_verify (ES256, HS256), Caddy + forward_auth, the gRPC check.
	hack/ensure-packages.sh wrk=wrk nginx=nginx-light haproxy=haproxy caddy=caddy
	@mkdir -p $(ARTIFACTS)
	go build -trimpath -o $(LOCALBIN)/herdgate-proxy ./cmd/herdgate-proxy
	go run ./test/bench/proxy --proxy=$(LOCALBIN)/herdgate-proxy --gateway --duration=$(BENCH_PROXY_DURATION) --out=$(ARTIFACTS)/bench-gateway.md

##@ Experiment

.PHONY: herd
herd: toolchain ## Run the thundering-herd experiment (batch 14/500/1000, jitter on/off) and regenerate docs/herd/.
	go run ./cmd/herd experiment --out docs/herd

.PHONY: herd-adaptive
herd-adaptive: toolchain ## Run the workload's bad days (slow-down, no-shows, error burst), Declared against Adaptive capacity, and regenerate docs/herd/adaptive.md.
	go run ./cmd/herd adaptive --out docs/herd

.PHONY: herd-lanes
herd-lanes: toolchain ## Run a herd into two metered lanes (20 % and 30 %) with an event of more capacity in the middle, and regenerate docs/herd/lanes.md.
	go run ./cmd/herd lanes --out docs/herd

.PHONY: herd-estimates
herd-estimates: toolchain ## Run eight crowds (a burst, no-shows, leavers, a lane, an event, a full cap...) into a live room, judge every wait told, and regenerate docs/herd/estimates.md.
	go run ./cmd/herd estimates --out docs/herd

.PHONY: herd-launch
herd-launch: toolchain ## Run a launch (2,000 in the pre-queue, the draw, maxActive 50) and regenerate docs/herd/launch.md.
	go run ./cmd/herd launch --out docs/herd

##@ Tools

$(CONTROLLER_GEN):
	$(call go-install-tool,$@,sigs.k8s.io/controller-tools/cmd/controller-gen,$(CONTROLLER_TOOLS_VERSION))

$(GOLANGCI_LINT):
	$(call go-install-tool,$@,github.com/golangci/golangci-lint/v2/cmd/golangci-lint,$(GOLANGCI_LINT_VERSION))

$(GOTESTSUM):
	$(call go-install-tool,$@,gotest.tools/gotestsum,$(GOTESTSUM_VERSION))

$(HELM):
	$(call go-install-tool,$@,helm.sh/helm/v3/cmd/helm,$(HELM_VERSION))

# go-install-tool installs $(2)@$(3) as $(1), so that a version bump installs the new version.
define go-install-tool
@echo "installing $(2)@$(3) into $(LOCALBIN)"
@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	GOBIN="$$tmp" go install $(2)@$(3) && \
	mkdir -p $(LOCALBIN) && mv "$$tmp/$$(basename $(2))" $(1)
endef

# Posture — build, generate, test, run.
# The two commands a newcomer needs: `make dev` and `make test` (see README.md).

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

LOCALBIN ?= $(CURDIR)/bin
CONTROLLER_TOOLS_VERSION ?= v0.21.0
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
GO_TEST_FLAGS ?= -count=1 -timeout 30m

.PHONY: all
all: build

##@ Generate

$(CONTROLLER_GEN):
	mkdir -p $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(LOCALBIN)/controller-gen $(CONTROLLER_GEN)

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## CRDs and RBAC from kubebuilder markers.
	$(CONTROLLER_GEN) rbac:roleName=posture-manager crd paths="./api/..." paths="./controllers/..." paths="./internal/servingcert/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	# The Helm chart carries copies: its CRDs (rendered by templates/crds.yaml, so helm upgrade upgrades them) and the rules its RBAC templates read.
	rm -rf charts/posture/files/crds && mkdir -p charts/posture/files/crds && cp config/crd/bases/*.yaml charts/posture/files/crds/
	cp config/rbac/role.yaml charts/posture/files/role.yaml
	rm -rf charts/posture/files/admission && mkdir -p charts/posture/files/admission
	cp $$(ls config/admission/*.yaml | grep -v /kustomization.yaml) charts/posture/files/admission/
	cp config/rbac/tenant_access_role.yaml charts/posture/files/tenant_access_role.yaml
	cp config/rbac/scanner_role.yaml charts/posture/files/scanner_role.yaml
	# The values table of charts/posture/README.md, from values.yaml and values.schema.json.
	go run ./hack/chartdocs charts/posture

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Deepcopy methods.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: verify
verify: manifests generate ## Fails when generated files are stale or code is not gofmt/vet clean.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	go vet ./...
	@git diff --exit-code -- config api charts || { echo "generated files are stale: run make manifests generate and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- config api charts)" || { git status --porcelain -- config api charts; echo "generated files are untracked or stale"; exit 1; }

##@ Build

.PHONY: build
build: ## Binaries into bin/.
	CGO_ENABLED=0 go build -trimpath -o $(LOCALBIN)/ ./cmd/...

.PHONY: krew
krew: ## kubectl-posture archives and their krew manifest into dist/krew (VERSION=v1.2.3).
	go run ./hack/krew -version $${VERSION:?set VERSION, e.g. make krew VERSION=v1.2.3} -out dist/krew

.PHONY: images
images: ## OCI image archives of the manager, the MCP server and postctl into dist/images (no Docker engine; reproducible digests).
	go run ./hack/images -out dist/images

.PHONY: control-plane
control-plane: ## Builds kube-apiserver and etcd from Go modules (cached, first time ~8 min).
	@hack/control-plane.sh

##@ Test

.PHONY: test
test: verify ## Unit, store conformance (SQLite + throwaway PostgreSQL), envtest, HTTP and browser tests, then Posture on a real one-node cluster (root).
	hack/test-deps.sh
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh)" go test $(GO_TEST_FLAGS) $$(go list ./... | grep -v '/test/node$$')
	# The chart's rendering and schema tests live in test/helm's own module (Helm's dependencies).
	cd test/helm && go test $(GO_TEST_FLAGS) ./...
	# Last, with the machine to itself: images built here, helm install on a real node (test/node).
	go test $(GO_TEST_FLAGS) -v ./test/node

.PHONY: fuzz
fuzz: ## Runs every fuzz target for FUZZTIME each.
	hack/fuzz.sh $${FUZZTIME:-30s}

# More flags for hack/bench, e.g. BENCH_FLAGS=-read-hold (see docs/performance.md).
BENCH_FLAGS ?=

.PHONY: bench
bench: ## End-to-end ingestion benchmark (records/s, MB/s, peak RSS), then findings reads through the REST API at 10k and 1M findings. BENCH_FLAGS adds flags.
	go run ./hack/bench $(BENCH_FLAGS)

.PHONY: bench-check
bench-check: ## The guard for any change to the store: the 100,000-record ingestion and the read shapes at 10k and 1M findings on both engines, in one process; fails when PostgreSQL's worker / COPY passes 3×, SQLite's worker falls below 3,000 records/s, or a read shape's p95 ratio 1M / 10k passes 3×. Not part of make test (about 20 minutes).
	go run ./hack/bench -check $(BENCH_FLAGS)

.PHONY: bench-node
bench-node: ## On a real one-node cluster: helm install until Ready, uploads through Job pods (1,500 and 100,000 records, 4 in parallel), manager RSS, image sizes; medians of NODE_RUNS (5).
	go test ./test/node -run '^$$' -bench . -benchtime 1x -timeout 60m -node-runs $${NODE_RUNS:-5}

# Minutes of make soak's mixed load; the drain and the checks come after.
SOAK_MINUTES ?= 10

.PHONY: soak
soak: ## The whole system on PostgreSQL under SOAK_MINUTES (10) of mixed load from several tenants, kill -9 of the manager included: throughput, p50/p95/p99, errors by code and RSS, then every record, refusal and tenant boundary checked.
	CGO_ENABLED=0 go build -trimpath -o $(LOCALBIN)/ ./cmd/... ./hack/soak
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh)" SOAK_MINUTES=$(SOAK_MINUTES) $(LOCALBIN)/soak

.PHONY: bench-reads-large
bench-reads-large: ## The read phase alone on PostgreSQL (shared_buffers 6GB) at 10k, 1M and 10M findings (long: loads 10M through the worker). BENCH_FLAGS=-read-hold keeps the 10M database up for EXPLAIN until Ctrl-C.
	go run ./hack/bench -records= -big-mib 0 -engines postgres -pg-shared-buffers 6GB -read-sizes 10000,1000000,10000000 $(BENCH_FLAGS)

##@ Run

# devenv is built with the binaries, by one go build with make build's flags, so the tree compiles
# once (-trimpath builds share no cache with builds without it).
.PHONY: dev
dev: ## Local control plane + manager + MCP server on embedded defaults; writes .dev/env; keeps its data in .dev.
	CGO_ENABLED=0 go build -trimpath -o $(LOCALBIN)/ ./cmd/... ./hack/devenv
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh)" $(LOCALBIN)/devenv

.PHONY: dev-reset
dev-reset: ## Wipes what make dev keeps (.dev/etcd, .dev/posture.db); refuses while make dev runs.
	CGO_ENABLED=0 go build -trimpath -o $(LOCALBIN)/ ./hack/devenv
	$(LOCALBIN)/devenv reset

.PHONY: cluster
cluster: images ## A one-node Kubernetes cluster on this machine (root) with Posture installed by Helm from dist/images; writes .cluster/env.
	go run ./hack/cluster up

.PHONY: cluster-down
cluster-down: ## Stops make cluster's node and removes everything it made (processes, mounts, cgroups, network namespace).
	go run ./hack/cluster down

.PHONY: clean
clean:
	rm -rf $(LOCALBIN) .dev .soak

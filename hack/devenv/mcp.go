package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	posturev1 "github.com/posture-dev/posture/api/v1alpha1"
	"github.com/posture-dev/posture/internal/demo"
	"github.com/posture-dev/posture/internal/testenv"
)

// devMCPServerName is the MCPServer applied in the demo tenant's namespace.
const devMCPServerName = "tools"

// annotationLocalURL marks where the dev environment really serves MCP: the
// MCPServer's own Deployment cannot run pods on a control plane without nodes.
const annotationLocalURL = "posture.dev/local-url"

// startMCP starts the MCP tool server over HTTP against the dev API, applies
// an MCPServer in the dev cluster, and returns the URL for POSTURE_MCP_URL.
func startMCP(ctx context.Context, procs *processes, s settings, apiURL string, seed *demo.Seeded) (string, error) {
	bin := filepath.Join(s.root, "bin", "mcp-server")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("bin/mcp-server is missing: run make dev (it builds first), not go run")
	}
	step("starting the MCP server (streamable HTTP at " + s.mcpAddr + ")")
	// The server's own environment: no key of the developer's shell becomes
	// a default identity, and API_BASE_URL is the flag's business.
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != "PROWLER_API_KEY" && name != "API_BASE_URL" && name != "POSTURE_MCP_DEFAULT_API_KEY" {
			env = append(env, kv)
		}
	}
	args := []string{"--transport=http", "--addr=" + s.mcpAddr, "--api-base-url=" + apiURL + "/api/v1"}
	if err := procs.start(ctx, spec{name: "mcp-server", path: bin, args: args, env: env,
		healthURL: "http://" + s.mcpAddr + "/healthz"}); err != nil {
		return "", err
	}
	if err := waitHTTP(ctx, "http://"+s.mcpAddr+"/healthz", procs); err != nil {
		return "", fmt.Errorf("the MCP server never answered: %w (see the mcp-server lines above)", err)
	}
	mcpURL := "http://" + s.mcpAddr + "/mcp"

	if err := applyDevMCPServer(ctx, s, seed.Namespace, mcpURL); err != nil {
		return "", err
	}
	return mcpURL, nil
}

// applyDevMCPServer creates the MCPServer the operator manages and reports
// its Ready condition as the manager's controller sets it: on this control
// plane it waits for replicas that never come, and says so.
func applyDevMCPServer(ctx context.Context, s settings, namespace, localURL string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(s.devDir, "kubeconfig"))
	if err != nil {
		return fmt.Errorf("read .dev/kubeconfig: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		return err
	}
	m := &posturev1.MCPServer{
		ObjectMeta: metav1.ObjectMeta{
			Name:        devMCPServerName,
			Namespace:   namespace,
			Annotations: map[string]string{annotationLocalURL: localURL},
		},
		// The image is the manager's --mcp-image: no author of an MCPServer picks it.
		Spec: posturev1.MCPServerSpec{},
	}
	step("applying MCPServer " + namespace + "/" + devMCPServerName)
	if err := c.Create(ctx, m); apierrors.IsAlreadyExists(err) {
		// Kept from the last run: only the local address may have moved.
		var old posturev1.MCPServer
		if err := c.Get(ctx, client.ObjectKeyFromObject(m), &old); err != nil {
			return fmt.Errorf("read MCPServer %s/%s: %w", namespace, devMCPServerName, err)
		}
		if old.Annotations[annotationLocalURL] != localURL {
			patch := client.MergeFrom(old.DeepCopy())
			metav1.SetMetaDataAnnotation(&old.ObjectMeta, annotationLocalURL, localURL)
			if err := c.Patch(ctx, &old, patch); err != nil {
				return fmt.Errorf("update MCPServer %s/%s: %w", namespace, devMCPServerName, err)
			}
		}
	} else if err != nil {
		return fmt.Errorf("create MCPServer %s/%s: %w", namespace, devMCPServerName, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got posturev1.MCPServer
		if err := c.Get(ctx, client.ObjectKeyFromObject(m), &got); err != nil {
			return fmt.Errorf("read MCPServer %s/%s: %w", namespace, devMCPServerName, err)
		}
		if cond := meta.FindStatusCondition(got.Status.Conditions, posturev1.ConditionReady); cond != nil {
			step(fmt.Sprintf("MCPServer %s/%s: Ready=%s (%s): %s; MCP is served locally at %s",
				namespace, devMCPServerName, cond.Status, cond.Reason, cond.Message, localURL))
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("MCPServer %s/%s got no Ready condition within 30s: is the manager's MCPServer controller running?", namespace, devMCPServerName)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

package localsystem

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
	"github.com/posture-dev/posture/internal/supervise"
	"github.com/posture-dev/posture/internal/testenv"
)

// devMCPServerName is the MCPServer applied in the first tenant's namespace.
const devMCPServerName = "tools"

// annotationLocalURL marks where the local system really serves MCP: the
// MCPServer's own Deployment cannot run pods on a control plane without nodes.
const annotationLocalURL = "posture.dev/local-url"

// startMCP starts the MCP tool server over HTTP against the system's API,
// applies an MCPServer in the first tenant's namespace, and returns the URL
// for POSTURE_MCP_URL.
func startMCP(ctx context.Context, s *System, o Options) (string, error) {
	step := o.Step
	step("starting the MCP server (streamable HTTP at " + o.MCPAddr + ")")
	// The server's own environment: no key of the developer's shell becomes
	// a default identity, and API_BASE_URL is the flag's business.
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != "PROWLER_API_KEY" && name != "API_BASE_URL" && name != "POSTURE_MCP_DEFAULT_API_KEY" {
			env = append(env, kv)
		}
	}
	args := []string{"--transport=http", "--addr=" + o.MCPAddr, "--api-base-url=" + s.APIURL + "/api/v1"}
	if err := s.Programs.Start(ctx, supervise.Spec{Name: MCPServerName, Path: filepath.Join(o.BinDir, MCPServerName), Args: args, Env: env,
		HealthURL: "http://" + o.MCPAddr + "/healthz"}); err != nil {
		return "", err
	}
	if err := waitHTTP(ctx, "http://"+o.MCPAddr+"/healthz", s.Programs); err != nil {
		return "", fmt.Errorf("the MCP server never answered: %w (see the mcp-server lines above)", err)
	}
	mcpURL := "http://" + o.MCPAddr + "/mcp"

	if err := applyDevMCPServer(ctx, step, s.Kubeconfig, s.Seed.Namespace, mcpURL); err != nil {
		return "", err
	}
	return mcpURL, nil
}

// applyDevMCPServer creates the MCPServer the operator manages and reports
// its Ready condition as the manager's controller sets it: on this control
// plane it waits for replicas that never come, and says so.
func applyDevMCPServer(ctx context.Context, step func(string), kubeconfig, namespace, localURL string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("read %s: %w", kubeconfig, err)
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

// Package cli is postctl: a Kubernetes posture scanner that can push its
// findings to the ingestion API, an uploader for other scanners' reports,
// and commands to follow ingestion jobs. Run is the whole program, so tests
// drive it without a process; cmd/postctl only wires it to the OS.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/posture-dev/posture/internal/scanner"
)

// Exit codes.
const (
	ExitOK = 0
	// ExitError: the command could not do its job (cluster or API
	// unreachable, bad file, a push that did not happen for `postctl push`).
	ExitError = 1
	// ExitUsage: wrong arguments or flags.
	ExitUsage = 2
	// ExitFindings: `scan` found at least one failing check. A push never
	// changes a scan's exit code.
	ExitFindings = 3
	// ExitJobFailed: `ingestions wait` saw the job end as failed.
	ExitJobFailed = 4
)

// exitError ends a command with a code; msg (if any) is printed to stderr.
// cause is the error of the args, if any, for a caller that tells one apart.
type exitError struct {
	code  int
	msg   string
	cause error
}

func (e *exitError) Error() string { return e.msg }

func (e *exitError) Unwrap() error { return e.cause }

func exit(code int, format string, args ...any) error {
	ee := &exitError{code: code, msg: fmt.Sprintf(format, args...)}
	for _, a := range args {
		if err, ok := a.(error); ok {
			ee.cause = err
		}
	}
	return ee
}

type usageError struct{ error }

// app is what every command shares: the streams and the environment it was
// given. Commands read the environment only through getenv, and never write it.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

// Run runs postctl with args (without the program name) and returns the
// exit code. env is the environment as os.Environ returns it.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int {
	return RunWithInput(ctx, args, os.Stdin, stdout, stderr, env)
}

// RunWithInput is Run with an explicit stdin (read by `token --password-stdin`).
func RunWithInput(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env []string) int {
	vars := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: func(k string) string { return vars[k] }}

	ran := false
	root := &cobra.Command{
		Use:   "postctl",
		Short: "Scan a Kubernetes cluster's security posture and push findings to the Posture ingestion API",
		Long: `postctl scans the cluster of the current kubeconfig for posture problems and writes
OCSF Detection Findings and CSV; with --push-to-cloud it uploads the findings to the
ingestion API. It also uploads reports of other scanners (push) and follows ingestion
jobs (ingestions). docs/cli.md describes every command and environment variable.`,
		Version:       scanner.ProductVersion(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(*cobra.Command, []string) {
			ran = true
		},
	}
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(a.scanCommand(), a.pushCommand(), a.ingestionsCommand(), a.tokenCommand(), a.exportCommand())

	// ran is read once the command has run.
	err := root.ExecuteContext(ctx)
	return exitCode(err, "postctl", ran, stderr)
}

// exitCode reports what a command run by prog ended with on stderr and
// turns it into the exit code: the code an *exitError carries, ExitUsage
// for misuse (a usageError, or an error before any command ran), else
// ExitError.
func exitCode(err error, prog string, ran bool, stderr io.Writer) int {
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	var ue usageError
	switch {
	case errors.As(err, &ee):
		if ee.msg != "" {
			fmt.Fprintln(stderr, prog+": "+ee.msg)
		}
		return ee.code
	case errors.As(err, &ue) || !ran:
		fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", prog, err, prog)
		return ExitUsage
	}
	fmt.Fprintln(stderr, prog+": "+err.Error())
	return ExitError
}

// args checks positional arguments and reports misuse as a usage error.
func args(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if len(a) != n {
			if n == 0 {
				return usageError{fmt.Errorf("%s takes no arguments, got %q", cmd.CommandPath(), a)}
			}
			return usageError{fmt.Errorf("%s needs %s", cmd.CommandPath(), names)}
		}
		return nil
	}
}

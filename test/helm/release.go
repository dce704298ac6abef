package main

import (
	"errors"
	"fmt"
	"log"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// applyRelease does what `helm upgrade --install` does, with Helm's own
// action package, against the cluster of kubeconfig: it installs release
// from the chart in dir, or upgrades it when it exists. It returns the
// revision reached.
func applyRelease(kubeconfig, dir, release, namespace string, overrides []string) (int, error) {
	cfg, err := actionConfig(kubeconfig, namespace)
	if err != nil {
		return 0, err
	}
	chrt, err := loader.Load(dir)
	if err != nil {
		return 0, err
	}
	vals, err := parseSets(overrides)
	if err != nil {
		return 0, err
	}
	hist := action.NewHistory(cfg)
	hist.Max = 1
	if _, err := hist.Run(release); errors.Is(err, driver.ErrReleaseNotFound) {
		install := action.NewInstall(cfg)
		install.ReleaseName, install.Namespace = release, namespace
		rel, err := install.Run(chrt, vals)
		if err != nil {
			return 0, fmt.Errorf("helm install %s: %w", release, err)
		}
		return rel.Version, nil
	} else if err != nil {
		return 0, fmt.Errorf("helm history %s: %w", release, err)
	}
	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = namespace
	rel, err := upgrade.Run(release, chrt, vals)
	if err != nil {
		return 0, fmt.Errorf("helm upgrade %s: %w", release, err)
	}
	return rel.Version, nil
}

// uninstallRelease is `helm uninstall`.
func uninstallRelease(kubeconfig, release, namespace string) error {
	cfg, err := actionConfig(kubeconfig, namespace)
	if err != nil {
		return err
	}
	if _, err := action.NewUninstall(cfg).Run(release); err != nil {
		return fmt.Errorf("helm uninstall %s: %w", release, err)
	}
	return nil
}

// actionConfig keeps releases where helm keeps them: in Secrets of namespace.
func actionConfig(kubeconfig, namespace string) (*action.Configuration, error) {
	settings := cli.New()
	settings.KubeConfig = kubeconfig
	settings.SetNamespace(namespace)
	cfg := new(action.Configuration)
	if err := cfg.Init(settings.RESTClientGetter(), namespace, "secret", log.Printf); err != nil {
		return nil, fmt.Errorf("helm configuration from %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

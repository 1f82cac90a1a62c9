// Package packaging has no code: its tests check docker-compose.yml, the Dockerfile and the
// kustomize manifests under deploy/ as far as a machine without a Docker engine can.
package packaging

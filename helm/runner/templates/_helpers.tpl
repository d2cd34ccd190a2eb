{{/*
The chart's name (nameOverride wins).
*/}}
{{- define "runner.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The RayJob's name: fullnameOverride, else the release name (plus "-<chart name>" unless it already holds it).
KubeRay refuses a RayJob name over 47 characters or not a DNS-1035 label (ray-operator/controllers/ray/utils/
validation.go, ValidateRayJobMetadata): fail here, before anything is sent, instead of truncating silently.
*/}}
{{- define "runner.fullname" -}}
{{- $name := .Values.fullnameOverride -}}
{{- if not $name -}}
{{- $base := default .Chart.Name .Values.nameOverride -}}
{{- if contains $base .Release.Name -}}
{{- $name = .Release.Name -}}
{{- else -}}
{{- $name = printf "%s-%s" .Release.Name $base -}}
{{- end -}}
{{- end -}}
{{- if gt (len $name) 47 -}}
{{- fail (printf "RayJob name %q is %d characters; KubeRay allows at most 47: use a shorter release name or fullnameOverride" $name (len $name)) -}}
{{- end -}}
{{- if not (regexMatch "^[a-z]([-a-z0-9]*[a-z0-9])?$" $name) -}}
{{- fail (printf "RayJob name %q is not a DNS-1035 label: use lower-case letters, digits and '-', starting with a letter (release name or fullnameOverride)" $name) -}}
{{- end -}}
{{- $name -}}
{{- end -}}

{{- define "runner.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "runner.labels" -}}
app.kubernetes.io/name: {{ include "runner.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ include "runner.chart" . }}
{{- end -}}

{{/*
The pods' service account: the one this chart creates, a named existing one, or none (the namespace default).
*/}}
{{- define "runner.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "runner.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The entrypoint: the same command as on a laptop. KubeRay places it in a shell command line as is, so extraArgs
are limited to shell-safe characters by values.schema.json.
*/}}
{{- define "runner.entrypoint" -}}
{{- $args := list "python" "-m" "runner" (ternary "matrix" "run" (not (empty .Values.job.matrix))) "--config" "/etc/runner/config.yaml" -}}
{{- range .Values.job.extraArgs -}}
{{- $args = append $args . -}}
{{- end -}}
{{- join " " $args -}}
{{- end -}}

{{/*
requests == limits: Ray sizes itself from the limits, and the scheduler reserves exactly that (an extended resource
such as nvidia.com/gpu must have its request equal to its limit anyway). Takes a dict with cpu, memory and
optionally gpu (-> nvidia.com/gpu).
*/}}
{{- define "runner.resources" -}}
requests:
  {{- include "runner.amounts" . | nindent 2 }}
limits:
  {{- include "runner.amounts" . | nindent 2 }}
{{- end -}}

{{- define "runner.amounts" -}}
cpu: {{ .cpu | quote }}
memory: {{ .memory | quote }}
{{- if .gpu }}
nvidia.com/gpu: {{ .gpu | int }}
{{- end }}
{{- end -}}

{{/*
NO_PROXY and no_proxy for the pods when common.env sets a proxy variable (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, in
either case) and neither spelling of NO_PROXY: loopback and the cluster's own names, as a list of env entries (none
otherwise). KubeRay's submitter runs "ray job submit" against <head service>.<namespace>.svc.cluster.local:8265
with requests, which honours the proxy variables; an egress proxy cannot reach it. runner.kuberay.manifest's
no_proxy_env makes the same.
*/}}
{{- define "runner.noProxyEnv" -}}
{{- $names := list -}}
{{- range .Values.common.env -}}
{{- $names = append $names .name -}}
{{- end -}}
{{- $proxied := false -}}
{{- range (list "HTTP_PROXY" "HTTPS_PROXY" "ALL_PROXY" "http_proxy" "https_proxy" "all_proxy") -}}
{{- if has . $names }}{{ $proxied = true }}{{ end -}}
{{- end -}}
{{- $env := list -}}
{{- if and $proxied (not (has "NO_PROXY" $names)) (not (has "no_proxy" $names)) -}}
{{- range (list "NO_PROXY" "no_proxy") -}}
{{- $env = append $env (dict "name" . "value" "127.0.0.1,localhost,::1,.svc,.cluster.local") -}}
{{- end -}}
{{- end -}}
{{- toYaml $env -}}
{{- end -}}

{{/*
Container fields shared by the head, the workers and the submitter: the pull policy, the security context, and
the environment: common.env and the NO_PROXY it calls for (runner.noProxyEnv), then the container's own (a list in
"env": HF_TOKEN, the model cache's paths). Takes (dict "root" $ "env" <list>). The storage Secret is referenced by
name (envFrom), so its values never appear in values, manifests or the Ray runtime env.
*/}}
{{- define "runner.containerCommon" -}}
{{- $values := .root.Values -}}
imagePullPolicy: {{ $values.image.pullPolicy }}
{{- with $values.securityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with concat $values.common.env (include "runner.noProxyEnv" .root | fromYamlArray) (.env | default list) }}
env:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- $envFrom := list -}}
{{- if eq $values.storage.credentials.source "secret" -}}
{{- $envFrom = append $envFrom (dict "secretRef" (dict "name" $values.storage.credentials.secretRef)) -}}
{{- end -}}
{{- $envFrom = concat $envFrom $values.common.envFrom -}}
{{- with $envFrom }}
envFrom:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
HF_TOKEN from the Secret hfToken.secretName (never a value: the pods read the Secret), as a list of env entries:
on the head (the driver reads gated data sets with it) and the workers (the replicas download with it).
*/}}
{{- define "runner.hfTokenEnv" -}}
{{- $env := list -}}
{{- with .Values.hfToken.secretName -}}
{{- $env = append $env (dict "name" "HF_TOKEN" "valueFrom" (dict "secretKeyRef" (dict "name" . "key" $.Values.hfToken.key))) -}}
{{- end -}}
{{- toYaml $env -}}
{{- end -}}

{{/*
The model cache's variables on the workers, as a list of env entries: HF_HOME (the Hub's downloads) and
RUNNER_MODEL_CACHE (the converted embedded model) under modelCache.mountPath. None on the head: the driver hands its
Hub variables to the replicas, so a head value would override the workers' path.
*/}}
{{- define "runner.modelCacheEnv" -}}
{{- $env := list -}}
{{- $cache := .Values.modelCache -}}
{{- if ne $cache.type "none" -}}
{{- $env = append $env (dict "name" "HF_HOME" "value" (printf "%s/huggingface" $cache.mountPath)) -}}
{{- $env = append $env (dict "name" "RUNNER_MODEL_CACHE" "value" (printf "%s/runner" $cache.mountPath)) -}}
{{- end -}}
{{- toYaml $env -}}
{{- end -}}

{{/*
The model cache's claim: the named one, else "<fullname>-models" (the one templates/modelcache.yaml creates).
*/}}
{{- define "runner.modelCacheClaim" -}}
{{- .Values.modelCache.persistentVolumeClaim.claimName | default (printf "%s-models" (include "runner.fullname" .)) -}}
{{- end -}}

{{/*
Pod fields shared by every pod: service account, pull secrets, the non-root security context.
*/}}
{{- define "runner.podCommon" -}}
{{- with include "runner.serviceAccountName" . }}
serviceAccountName: {{ . }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
Placement of a group's pods; takes the head's or a worker group's values.
*/}}
{{- define "runner.placement" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
A pod's metadata (labels, annotations), or nothing; takes (dict "common" .Values.common "group" <the head's or a
worker group's values, or an empty dict for the submitter>): common.podLabels and common.podAnnotations, with the
group's own labels and annotations winning.
*/}}
{{- define "runner.podMetadata" -}}
{{- $labels := merge (deepCopy (.group.labels | default dict)) (.common.podLabels | default dict) -}}
{{- $annotations := merge (deepCopy (.group.annotations | default dict)) (.common.podAnnotations | default dict) -}}
{{- if or $labels $annotations }}
metadata:
  {{- with $labels }}
  labels:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end -}}

{{/*
KubeRay v1.7's rules on two values at once, which values.schema.json cannot compare (rules on one value are in the
schema). Source: ray-operator/controllers/ray/utils/validation.go, ValidateRayClusterSpec; runner.kuberay.checks
holds the same rules for what submit builds. Two rules are the runner's own: unique worker group names (they name
the groups' pods), and replicas within minReplicas..maxReplicas, which KubeRay would clamp silently (utils/util.go,
GetWorkerGroupDesiredReplicas).
*/}}
{{- define "runner.checkKubeRayRules" -}}
{{- if and (eq .Values.auth.mode "token") (not (semverCompare ">=2.52.0-0" .Values.rayVersion)) -}}
{{- fail (printf "auth.mode 'token' needs rayVersion 2.52.0 or later, got %q: set rayVersion to the image's Ray version, or auth.mode: disabled (KubeRay v1.7 validation.go ValidateRayClusterSpec)" .Values.rayVersion) -}}
{{- end -}}
{{- $seen := dict -}}
{{- range $index, $group := .Values.workerGroups -}}
{{- if hasKey $seen $group.name -}}
{{- fail (printf "workerGroups[%d] (%s): name %q is used twice; worker group names must be unique" $index $group.name $group.name) -}}
{{- end -}}
{{- $_ := set $seen $group.name true -}}
{{- $min := $group.replicas -}}
{{- if not (kindIs "invalid" $group.minReplicas) }}{{ $min = $group.minReplicas }}{{ end -}}
{{- $max := $group.replicas -}}
{{- if not (kindIs "invalid" $group.maxReplicas) }}{{ $max = $group.maxReplicas }}{{ end -}}
{{- if gt (int $min) (int $max) -}}
{{- fail (printf "workerGroups[%d] (%s): minReplicas %d is greater than maxReplicas %d; lower minReplicas or raise maxReplicas (KubeRay v1.7 validation.go ValidateRayClusterSpec)" $index $group.name (int $min) (int $max)) -}}
{{- end -}}
{{- if or (lt (int $group.replicas) (int $min)) (gt (int $group.replicas) (int $max)) -}}
{{- fail (printf "workerGroups[%d] (%s): replicas %d is outside minReplicas %d .. maxReplicas %d; KubeRay would run the nearest bound instead: set replicas within them" $index $group.name (int $group.replicas) (int $min) (int $max)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "jenkins.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "jenkins.labels" -}}
app.kubernetes.io/name: {{ default .Chart.Name .Values.nameOverride | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
app.kubernetes.io/component: jenkins-controller
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
{{- with .Values.extraLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "jenkins.selector" -}}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/component: jenkins-controller
{{- end -}}

{{- define "jenkins.agent.namespace" -}}
{{- default .Release.Namespace .Values.agent.namespace -}}
{{- end -}}

{{- define "jenkins.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "jenkins.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "jenkins.adminSecretName" -}}
{{- default (include "jenkins.fullname" .) .Values.controller.admin.existingSecret -}}
{{- end -}}

{{- define "jenkins.image" -}}
{{- $image := .Values.controller.image -}}
{{- printf "%s/%s:%s" $image.registry $image.repository (default (printf "%s-jdk17" .Chart.AppVersion) $image.tag) -}}
{{- end -}}

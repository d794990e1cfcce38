#!/usr/bin/env node
// Checks rendered Kubernetes manifests of deploy/kubernetes (tests/deploy/README.md):
//   node validate.js [--gke] FILE.yaml ...   schema + security checks + mutation checks
//   node validate.js --same A.yaml B.yaml     the two renderings hold the same objects
// Each object is validated against the Kubernetes API schema of its apiVersion/kind
// (kubernetes-models); an unknown kind is a failure. Then every security property is a
// named check printing PASS or FAIL, and every property is removed once from a copy of
// the objects (a mutation) to show that its check then fails. Exit 1 on any failure.
'use strict';
const fs = require('fs');
const YAML = require('yaml');

// ---- Reading ----------------------------------------------------------------------
function readObjects(files) {
  const objs = [];
  for (const f of files) {
    for (const doc of YAML.parseAllDocuments(fs.readFileSync(f, 'utf8'))) {
      if (doc.errors.length) throw new Error(`${f}: ${doc.errors[0].message}`);
      const o = doc.toJSON();
      if (o !== null && o !== undefined) objs.push(o);
    }
  }
  return objs;
}
const clone = (x) => JSON.parse(JSON.stringify(x));
const id = (o) => `${o.kind}/${(o.metadata || {}).name}`;

// ---- Schemas ------------------------------------------------------------------------
// "apps/v1" -> kubernetes-models/apps/v1, "v1" -> kubernetes-models/v1.
function schemaErrors(o) {
  if (!o.apiVersion || !o.kind) return ['no apiVersion or kind'];
  let mod;
  try {
    mod = require(`kubernetes-models/${o.apiVersion}`);
  } catch (e) {
    return [`unknown apiVersion ${o.apiVersion}`];
  }
  const Model = mod[o.kind];
  if (typeof Model !== 'function') return [`unknown kind ${o.kind} in ${o.apiVersion}`];
  try {
    new Model(o).validate();
  } catch (e) {
    return [e.message.split('\n').slice(0, 5).join('; ')];
  }
  return [];
}

// ---- Views of the objects --------------------------------------------------------
const APP = 'app.kubernetes.io/name';
const COMPONENT = 'app.kubernetes.io/component';
const SA = 'elastrain';
const GRACE_ANNOTATION = 'elastrain/preemption-notice-seconds';

function podTemplates(objs) {
  const out = [];
  for (const o of objs) {
    const spec = o.spec || {};
    let t = null;
    if (o.kind === 'Pod') t = { metadata: o.metadata, spec: o.spec };
    else if (spec.template) t = spec.template;
    else if (spec.jobTemplate && spec.jobTemplate.spec) t = spec.jobTemplate.spec.template;
    if (t) out.push({ owner: o, name: id(o), meta: t.metadata || {}, spec: t.spec || {} });
  }
  return out;
}
const labelsOf = (t) => t.meta.labels || {};
const componentOf = (t) => labelsOf(t)[COMPONENT];
const byComponent = (objs, c) => podTemplates(objs).filter((t) => componentOf(t) === c);
const containersOf = (t) => [...(t.spec.initContainers || []), ...(t.spec.containers || [])];
const find = (objs, kind, name) => objs.find((o) => o.kind === kind && o.metadata && o.metadata.name === name);

// A label selector {matchLabels, matchExpressions} against a label map.
function selects(sel, labels) {
  if (!sel) return false;
  for (const [k, v] of Object.entries(sel.matchLabels || {})) if (labels[k] !== v) return false;
  for (const e of sel.matchExpressions || []) {
    const has = Object.prototype.hasOwnProperty.call(labels, e.key);
    const vals = e.values || [];
    if (e.operator === 'In' && !(has && vals.includes(labels[e.key]))) return false;
    if (e.operator === 'NotIn' && has && vals.includes(labels[e.key])) return false;
    if (e.operator === 'Exists' && !has) return false;
    if (e.operator === 'DoesNotExist' && has) return false;
  }
  return true;
}

// ---- The checks: each returns a list of problems, empty when it passes ------------
const checks = {};

checks['serviceaccount-without-token'] = (objs) => {
  const sa = find(objs, 'ServiceAccount', SA);
  if (!sa) return [`no ServiceAccount ${SA}`];
  return sa.automountServiceAccountToken === false ? [] : [`ServiceAccount ${SA}: automountServiceAccountToken is not false`];
};

checks['pods-use-serviceaccount-without-token'] = (objs) => {
  const p = [];
  const ts = podTemplates(objs);
  if (ts.length === 0) p.push('no pod templates');
  for (const t of ts) {
    if (t.spec.serviceAccountName !== SA) p.push(`${t.name}: serviceAccountName is ${t.spec.serviceAccountName}, not ${SA}`);
    if (t.spec.automountServiceAccountToken !== false) p.push(`${t.name}: automountServiceAccountToken is not false`);
  }
  return p;
};

checks['no-api-permissions'] = (objs) =>
  objs.filter((o) => ['Role', 'ClusterRole', 'RoleBinding', 'ClusterRoleBinding'].includes(o.kind))
    .map((o) => `${id(o)}: elastrain needs no Kubernetes API permissions`);

// Container-level fields, set on every container (so that removing one from any
// container is seen even where a pod-level default would cover it).
function eachContainer(objs, test) {
  const p = [];
  for (const t of podTemplates(objs))
    for (const c of containersOf(t)) {
      const why = test(c.securityContext || {}, c, t);
      if (why) p.push(`${t.name} container ${c.name}: ${why}`);
    }
  return p;
}

checks['run-as-non-root'] = (objs) => [
  ...eachContainer(objs, (sc) => (sc.runAsNonRoot === true ? '' : 'securityContext.runAsNonRoot is not true')),
  ...eachContainer(objs, (sc, c, t) => {
    const uid = sc.runAsUser !== undefined ? sc.runAsUser : (t.spec.securityContext || {}).runAsUser;
    return uid === 0 ? 'runs as uid 0' : '';
  }),
  ...podTemplates(objs).filter((t) => (t.spec.securityContext || {}).runAsNonRoot !== true)
    .map((t) => `${t.name}: pod securityContext.runAsNonRoot is not true`),
];

checks['read-only-root-filesystem'] = (objs) =>
  eachContainer(objs, (sc) => (sc.readOnlyRootFilesystem === true ? '' : 'securityContext.readOnlyRootFilesystem is not true'));

checks['no-privilege-escalation'] = (objs) =>
  eachContainer(objs, (sc) => {
    if (sc.allowPrivilegeEscalation !== false) return 'securityContext.allowPrivilegeEscalation is not false';
    if (sc.privileged) return 'privileged';
    return '';
  });

checks['capabilities-drop-all'] = (objs) =>
  eachContainer(objs, (sc) => {
    const caps = sc.capabilities || {};
    if (!(caps.drop || []).includes('ALL')) return 'capabilities.drop lacks ALL';
    if ((caps.add || []).length) return `capabilities.add ${caps.add.join(',')}`;
    return '';
  });

checks['seccomp-runtime-default'] = (objs) =>
  eachContainer(objs, (sc, c, t) => {
    const prof = sc.seccompProfile || (t.spec.securityContext || {}).seccompProfile || {};
    return ['RuntimeDefault', 'Localhost'].includes(prof.type) ? '' : 'no seccompProfile RuntimeDefault';
  });

checks['resource-requests'] = (objs) =>
  eachContainer(objs, (sc, c) => {
    const r = (c.resources || {}).requests || {};
    const missing = ['cpu', 'memory'].filter((k) => r[k] === undefined);
    return missing.length ? `no resources.requests.${missing.join(', ')}` : '';
  });

// Secret volumes: mode without bits for others and without write or execute (the
// default, 0644, fails); the pod has an fsGroup so its non-root user can read 0440;
// mounted read-only. Each role mounts the Secrets it needs.
const SECRET_MOUNTS = {
  etcd: ['elastrain-etcd-server-tls', 'elastrain-etcd-users'],
  head: ['elastrain-api-token', 'elastrain-head-tls', 'elastrain-etcd-head', 'elastrain-head-signing'],
  agent: ['elastrain-etcd-agent', 'elastrain-head-public-key'],
};
checks['secrets-mounted-restrictively'] = (objs) => {
  const p = [];
  for (const t of podTemplates(objs)) {
    const vols = t.spec.volumes || [];
    const secretVols = vols.filter((v) => v.secret);
    for (const v of secretVols) {
      const mode = v.secret.defaultMode === undefined ? 0o644 : v.secret.defaultMode;
      if ((mode & ~0o440) !== 0) p.push(`${t.name}: volume ${v.name} defaultMode 0${mode.toString(8)} (expected 0440 or 0400)`);
      for (const it of v.secret.items || [])
        if (it.mode !== undefined && (it.mode & ~0o440) !== 0) p.push(`${t.name}: volume ${v.name} item ${it.key} mode 0${it.mode.toString(8)}`);
      for (const c of containersOf(t))
        for (const m of c.volumeMounts || [])
          if (m.name === v.name && m.readOnly !== true) p.push(`${t.name} container ${c.name}: ${v.name} not mounted readOnly`);
    }
    if (secretVols.length && (t.spec.securityContext || {}).fsGroup === undefined)
      p.push(`${t.name}: mounts Secrets 0440 but sets no securityContext.fsGroup`);
    const need = SECRET_MOUNTS[componentOf(t)] || [];
    for (const s of need) {
      const v = secretVols.find((x) => x.secret.secretName === s);
      const mounted = v && containersOf(t).some((c) => (c.volumeMounts || []).some((m) => m.name === v.name));
      if (!mounted) p.push(`${t.name}: does not mount Secret ${s}`);
    }
  }
  return p;
};

// No secret reaches a container as an environment value: no secretKeyRef, no envFrom
// of a Secret, and no literal value for a variable named like a secret (a path to a
// file is fine: ELASTRAIN_ETCD_KEY=/etc/...).
checks['no-secrets-in-env'] = (objs) =>
  eachContainer(objs, (sc, c) => {
    for (const e of c.env || []) {
      if (e.valueFrom && e.valueFrom.secretKeyRef) return `env ${e.name} from Secret ${e.valueFrom.secretKeyRef.name}`;
      if (/TOKEN|PASSWORD|SECRET|KEY/i.test(e.name) && e.value !== undefined && !String(e.value).startsWith('/'))
        return `env ${e.name} holds a literal value`;
    }
    for (const e of c.envFrom || []) if (e.secretRef) return `envFrom Secret ${e.secretRef.name}`;
    return '';
  });

// Each role mounts only the Secrets it needs (SECRET_MOUNTS): an agent pod, where launched
// programs run as the agent's user, holds neither the API token nor the head's or etcd's
// credentials.
checks['secrets-only-where-needed'] = (objs) => {
  const p = [];
  for (const t of podTemplates(objs)) {
    const need = SECRET_MOUNTS[componentOf(t)] || [];
    const names = [];
    for (const v of t.spec.volumes || []) {
      if (v.secret) names.push(v.secret.secretName);
      for (const src of (v.projected || {}).sources || []) if (src.secret) names.push(src.secret.name);
    }
    for (const n of names) if (!need.includes(n)) p.push(`${t.name}: mounts Secret ${n}, which a ${componentOf(t)} does not need`);
  }
  return p;
};

// etcd's user authentication: etcd's pod creates the users and turns auth on; the head
// and the agents log in as different users with different Secrets (certificate and
// password), each from its own mounted file.
const ETCD_USERS = { head: ['elastrain-head', 'elastrain-etcd-head'], agent: ['elastrain-agent', 'elastrain-etcd-agent'] };
checks['etcd-user-auth'] = (objs) => {
  const p = [];
  for (const t of byComponent(objs, 'etcd'))
    for (const c of t.spec.containers || []) {
      const script = (c.command || []).join('\n');
      if (!/etcdctl auth enable/.test(script)) p.push(`${t.name}: etcd's container never turns auth on (etcdctl auth enable)`);
      if (!/grant-permission elastrain-agent --prefix=true read elastrain\//.test(script) || /elastrain-agent --prefix=true readwrite elastrain\/ /.test(script + ' '))
        p.push(`${t.name}: the role elastrain-agent is not read-only on elastrain/`);
      for (const k of ['agents', 'reports', 'departed', 'health', 'commands', 'rdzv'])
        if (!script.includes(k)) p.push(`${t.name}: the role elastrain-agent cannot write elastrain/${k}/`);
      if (/readwrite elastrain\/job/.test(script)) p.push(`${t.name}: the agents may write elastrain/job/`);
    }
  const used = {};
  for (const [role, [user, secret]] of Object.entries(ETCD_USERS))
    for (const t of byComponent(objs, role))
      for (const c of t.spec.containers || []) {
        const env = Object.fromEntries((c.env || []).map((e) => [e.name, e.value]));
        if (env.ELASTRAIN_ETCD_USER !== user) p.push(`${t.name}: ELASTRAIN_ETCD_USER is ${env.ELASTRAIN_ETCD_USER}, expected ${user}`);
        const vol = (t.spec.volumes || []).find((v) => v.secret && v.secret.secretName === secret);
        const mount = vol && (c.volumeMounts || []).find((m) => m.name === vol.name);
        if (!mount) { p.push(`${t.name}: does not mount its etcd Secret ${secret}`); continue; }
        for (const [v, file] of [['ELASTRAIN_ETCD_PASSWORD_FILE', 'password'], ['ELASTRAIN_ETCD_CERT', 'tls.crt'], ['ELASTRAIN_ETCD_KEY', 'tls.key']])
          if (env[v] !== `${mount.mountPath}/${file}`) p.push(`${t.name}: ${v} is ${env[v]}, expected ${mount.mountPath}/${file} (Secret ${secret})`);
        used[role] = env.ELASTRAIN_ETCD_USER;
      }
  if (used.head && used.head === used.agent) p.push(`the head and the agents share the etcd user ${used.head}`);
  const h = find(objs, 'Secret', 'elastrain-etcd-head');
  const a = find(objs, 'Secret', 'elastrain-etcd-agent');
  if (h && a)
    for (const k of ['tls.crt', 'tls.key', 'password'])
      if ((h.data || {})[k] && (h.data || {})[k] === (a.data || {})[k]) p.push(`the head's and the agents' etcd Secrets share ${k}`);
  return p;
};

checks['secrets-exist'] = (objs) => {
  const p = [];
  const keys = { 'elastrain-api-token': ['token'], 'elastrain-etcd-users': ['root', 'elastrain-head', 'elastrain-agent'],
    'elastrain-head-signing': ['signing.key'], 'elastrain-head-public-key': ['head.pub'] };
  for (const s of ['elastrain-etcd-server-tls', 'elastrain-head-tls']) keys[s] = ['ca.crt', 'tls.crt', 'tls.key'];
  for (const s of ['elastrain-etcd-head', 'elastrain-etcd-agent']) keys[s] = ['ca.crt', 'tls.crt', 'tls.key', 'password'];
  for (const [name, ks] of Object.entries(keys)) {
    const s = find(objs, 'Secret', name);
    if (!s) { p.push(`no Secret ${name}`); continue; }
    for (const k of ks) if (!(s.data || {})[k]) p.push(`Secret ${name} has no ${k}`);
  }
  const tok = find(objs, 'Secret', 'elastrain-api-token');
  if (tok && (tok.data || {}).token) {
    const t = Buffer.from(tok.data.token, 'base64').toString();
    if (!/^[0-9a-f]{64}\n$/.test(t)) p.push('Secret elastrain-api-token: token is not 64 hex digits and a newline');
  }
  return p;
};

// The checkpoint volume: a PVC with ReadWriteMany, mounted at /checkpoints by the head
// and every agent.
checks['checkpoints-readwritemany'] = (objs) => {
  const p = [];
  for (const c of ['head', 'agent']) {
    const ts = byComponent(objs, c);
    if (!ts.length) p.push(`no ${c} pods`);
    for (const t of ts) {
      const mount = containersOf(t).flatMap((x) => x.volumeMounts || []).find((m) => m.mountPath === '/checkpoints');
      if (!mount) { p.push(`${t.name}: nothing mounted at /checkpoints`); continue; }
      const v = (t.spec.volumes || []).find((x) => x.name === mount.name) || {};
      if (!v.persistentVolumeClaim) { p.push(`${t.name}: /checkpoints is not a PersistentVolumeClaim`); continue; }
      const pvc = find(objs, 'PersistentVolumeClaim', v.persistentVolumeClaim.claimName);
      if (!pvc) p.push(`${t.name}: no PersistentVolumeClaim ${v.persistentVolumeClaim.claimName}`);
      else if (!(pvc.spec.accessModes || []).includes('ReadWriteMany'))
        p.push(`${id(pvc)}: accessModes ${JSON.stringify(pvc.spec.accessModes)} lack ReadWriteMany`);
    }
  }
  return p;
};

const agentSet = (objs) => objs.find((o) => ['StatefulSet', 'Job'].includes(o.kind) &&
  selects({ matchLabels: { [COMPONENT]: 'agent' } }, ((o.spec.template || {}).metadata || {}).labels || {}));

checks['agent-grace-exceeds-preemption-notice'] = (objs) => {
  const a = agentSet(objs);
  if (!a) return ['no agent StatefulSet or Job'];
  const t = a.spec.template;
  const notice = Number(((t.metadata || {}).annotations || {})[GRACE_ANNOTATION]);
  if (!Number.isInteger(notice) || notice <= 0) return [`${id(a)}: no annotation ${GRACE_ANNOTATION} (the preemption_notice_seconds the grace period is sized for)`];
  const grace = t.spec.terminationGracePeriodSeconds;
  if (!(grace > notice)) return [`${id(a)}: terminationGracePeriodSeconds ${grace} is not above preemption_notice_seconds ${notice}`];
  return [];
};

checks['agent-anti-affinity-per-host'] = (objs) => {
  const a = agentSet(objs);
  if (!a) return ['no agent StatefulSet or Job'];
  const labels = a.spec.template.metadata.labels;
  const terms = ((a.spec.template.spec.affinity || {}).podAntiAffinity || {}).requiredDuringSchedulingIgnoredDuringExecution || [];
  return terms.some((x) => x.topologyKey === 'kubernetes.io/hostname' && selects(x.labelSelector, labels))
    ? [] : [`${id(a)}: no required podAntiAffinity on kubernetes.io/hostname selecting the agents`];
};

checks['agent-identity-from-downward-api'] = (objs) => {
  const want = { POD_NAME: 'metadata.name', NODE_NAME: 'spec.nodeName', POD_IP: 'status.podIP' };
  const p = [];
  for (const t of byComponent(objs, 'agent'))
    for (const c of t.spec.containers || [])
      for (const [name, path] of Object.entries(want)) {
        const e = (c.env || []).find((x) => x.name === name);
        const got = e && e.valueFrom && e.valueFrom.fieldRef && e.valueFrom.fieldRef.fieldPath;
        if (got !== path) p.push(`${t.name} container ${c.name}: ${name} is not the fieldRef ${path}`);
      }
  return p;
};

checks['pdb-selects-agents'] = (objs) => {
  const a = agentSet(objs);
  if (!a) return ['no agent StatefulSet or Job'];
  const pdbs = objs.filter((o) => o.kind === 'PodDisruptionBudget' && selects(o.spec.selector, a.spec.template.metadata.labels));
  if (!pdbs.length) return ['no PodDisruptionBudget selects the agents'];
  return pdbs.every((o) => o.spec.maxUnavailable !== undefined || o.spec.minAvailable !== undefined)
    ? [] : ['the agents\' PodDisruptionBudget sets neither maxUnavailable nor minAvailable'];
};

const ETCD_TLS_FLAGS = ['--cert-file', '--key-file', '--trusted-ca-file', '--client-cert-auth',
  '--peer-cert-file', '--peer-key-file', '--peer-trusted-ca-file', '--peer-client-cert-auth'];
checks['etcd-volume-and-tls'] = (objs) => {
  const p = [];
  const ss = objs.filter((o) => o.kind === 'StatefulSet' && componentOf({ meta: o.spec.template.metadata }) === 'etcd');
  if (!ss.length) return ['no etcd StatefulSet'];
  for (const s of ss) {
    const vct = (s.spec.volumeClaimTemplates || []).map((v) => v.metadata.name);
    if (!vct.length) p.push(`${id(s)}: no volumeClaimTemplates`);
    for (const c of s.spec.template.spec.containers) {
      const args = [...(c.command || []), ...(c.args || [])];
      const flag = (f) => args.find((a) => a === f || a.startsWith(f + '='));
      for (const f of ETCD_TLS_FLAGS) {
        const a = flag(f);
        if (!a || a.endsWith('=false')) p.push(`${id(s)} container ${c.name}: no ${f}`);
      }
      for (const f of ['--listen-client-urls', '--advertise-client-urls', '--listen-peer-urls', '--initial-advertise-peer-urls', '--initial-cluster']) {
        const a = flag(f);
        if (a && /http:\/\//.test(a)) p.push(`${id(s)} container ${c.name}: ${f} has a plain http:// URL`);
      }
      const dataDir = (flag('--data-dir') || '').split('=')[1] || '';
      const onClaim = (c.volumeMounts || []).some((m) => vct.includes(m.name) && dataDir.startsWith(m.mountPath));
      if (!onClaim) p.push(`${id(s)} container ${c.name}: --data-dir '${dataDir}' is not on a volumeClaimTemplate`);
    }
  }
  return p;
};

// The head and agents reach etcd over TLS with a client certificate; the head serves
// HTTPS with its token.
checks['clients-use-tls'] = (objs) => {
  const p = [];
  for (const c of ['head', 'agent'])
    for (const t of byComponent(objs, c))
      for (const x of t.spec.containers || []) {
        const args = x.args || [];
        const env = Object.fromEntries((x.env || []).map((e) => [e.name, e.value]));
        if (!args.some((a) => a.startsWith('--store=etcds://'))) p.push(`${t.name}: --store is not etcds://`);
        for (const v of ['ELASTRAIN_ETCD_CA', 'ELASTRAIN_ETCD_CERT', 'ELASTRAIN_ETCD_KEY', 'ELASTRAIN_ETCD_USER', 'ELASTRAIN_ETCD_PASSWORD_FILE'])
          if (!env[v]) p.push(`${t.name}: no ${v}`);
        if (c === 'head')
          for (const f of ['--tls-cert=', '--tls-key=', '--token-file='])
            if (!args.some((a) => a.startsWith(f))) p.push(`${t.name}: no ${f.slice(0, -1)}`);
      }
  return p;
};

// Two heads (issue 36): one leads, the other stands by and takes over within a lease;
// never both on one node (a node's loss would take both), and a rollout replaces one at
// a time, so one head is always up.
checks['standby-heads'] = (objs) => {
  const ds = objs.filter((o) => o.kind === 'Deployment' && componentOf({ meta: o.spec.template.metadata }) === 'head');
  if (ds.length !== 1) return [`${ds.length} head Deployments (expected 1)`];
  const d = ds[0];
  const p = [];
  if (!(d.spec.replicas >= 2)) p.push(`${id(d)}: replicas ${d.spec.replicas} (expected 2: a leader and a standby)`);
  const st = d.spec.strategy || {};
  const ru = st.rollingUpdate || {};
  if (st.type !== 'RollingUpdate' || ru.maxUnavailable !== 1 || ru.maxSurge !== 0)
    p.push(`${id(d)}: strategy is not RollingUpdate with maxUnavailable 1, maxSurge 0 (one head at a time replaced)`);
  const labels = d.spec.template.metadata.labels;
  const terms = ((d.spec.template.spec.affinity || {}).podAntiAffinity || {}).requiredDuringSchedulingIgnoredDuringExecution || [];
  if (!terms.some((x) => x.topologyKey === 'kubernetes.io/hostname' && selects(x.labelSelector, labels)))
    p.push(`${id(d)}: no required podAntiAffinity on kubernetes.io/hostname selecting the heads`);
  return p;
};

// ---- NetworkPolicy: what each pod may receive and send --------------------------
// The pods that exist (by role) plus two that may: an API client and any other pod.
function peers(objs) {
  const ps = {};
  for (const c of ['etcd', 'head', 'agent']) {
    const t = byComponent(objs, c)[0];
    ps[c] = t ? labelsOf(t) : { [APP]: 'elastrain', [COMPONENT]: c };
  }
  ps['api-client'] = { 'elastrain/api-client': 'true' };
  ps.other = {};
  return ps;
}
const ALL = [[1, 65535]];
// A rule's ports as {proto: [[lo, hi], ...]}; no ports: every port of every protocol.
function portRanges(ports) {
  const out = {};
  const add = (proto, r) => { (out[proto] = out[proto] || []).push(r); };
  if (!ports || ports.length === 0) { for (const pr of ['TCP', 'UDP', 'SCTP']) add(pr, ALL[0]); return out; }
  for (const p of ports) {
    const proto = p.protocol || 'TCP';
    if (p.port === undefined) add(proto, ALL[0]);
    else if (typeof p.port !== 'number') add(proto, [-1, -1]);  // a named port: not resolved, flagged below
    else add(proto, [p.port, p.endPort || p.port]);
  }
  return out;
}
// Which peers a rule's from/to matches; "*" stands for any address at all.
function ruleEnds(list, ps) {
  if (!list || list.length === 0) return ['*'];
  const ends = new Set();
  for (const x of list) {
    if (x.ipBlock || x.namespaceSelector) { ends.add('*'); continue; }
    for (const [n, l] of Object.entries(ps)) if (selects(x.podSelector, l)) ends.add(n);
  }
  return [...ends];
}
// {peer: {proto: merged ranges}} a pod of role `role` is allowed in `dir` (Ingress|Egress).
function allowed(objs, role, dir) {
  const ps = peers(objs);
  const labels = ps[role];
  const pols = objs.filter((o) => o.kind === 'NetworkPolicy' && selects(o.spec.podSelector, labels));
  const types = (o) => o.spec.policyTypes || (dir === 'Egress' ? (o.spec.egress ? ['Ingress', 'Egress'] : ['Ingress']) : ['Ingress']);
  const isolating = pols.filter((o) => types(o).includes(dir));
  const acc = {};
  const add = (peer, proto, r) => { ((acc[peer] = acc[peer] || {})[proto] = acc[peer][proto] || []).push(r); };
  if (!isolating.length) { for (const pr of ['TCP', 'UDP', 'SCTP']) add('*', pr, ALL[0]); }
  for (const o of isolating)
    for (const rule of (dir === 'Ingress' ? o.spec.ingress : o.spec.egress) || []) {
      const ends = ruleEnds(dir === 'Ingress' ? rule.from : rule.to, ps);
      const ranges = portRanges(rule.ports);
      for (const e of ends) for (const [pr, rs] of Object.entries(ranges)) for (const r of rs) add(e, pr, r);
    }
  for (const peer of Object.keys(acc)) for (const pr of Object.keys(acc[peer])) acc[peer][pr] = merge(acc[peer][pr]);
  return acc;
}
function merge(rs) {
  const s = rs.map((r) => r.slice()).sort((a, b) => a[0] - b[0]);
  const out = [];
  for (const r of s) {
    const last = out[out.length - 1];
    if (last && r[0] <= last[1] + 1) last[1] = Math.max(last[1], r[1]);
    else out.push(r);
  }
  return out;
}
const DNS = { UDP: [[53, 53]], TCP: [[53, 53]] };
const EXPECTED = {
  Ingress: {
    etcd: { head: { TCP: [[2379, 2379]] }, agent: { TCP: [[2379, 2379]] }, etcd: { TCP: [[2379, 2380]] } },
    head: { 'api-client': { TCP: [[8265, 8265]] } },
    agent: { agent: { TCP: ALL } },
  },
  Egress: {
    etcd: { etcd: { TCP: [[2379, 2380]] }, '*': DNS },
    head: { etcd: { TCP: [[2379, 2379]] }, '*': DNS },
    agent: { agent: { TCP: ALL }, etcd: { TCP: [[2379, 2379]] }, '*': DNS },
  },
};
const fmt = (m) => JSON.stringify(Object.keys(m).sort().map((k) => [k, Object.keys(m[k]).sort().map((p) => [p, m[k][p]])]));
function networkCheck(dir) {
  return (objs) => {
    const p = [];
    for (const role of Object.keys(EXPECTED[dir])) {
      if (!byComponent(objs, role).length) { p.push(`no ${role} pods`); continue; }
      const got = allowed(objs, role, dir);
      const want = EXPECTED[dir][role];
      if (fmt(got) !== fmt(want))
        p.push(`${role} ${dir === 'Ingress' ? 'accepts' : 'may send'} ${fmt(got)}; expected exactly ${fmt(want)}`);
    }
    return p;
  };
}
checks['networkpolicy-default-deny'] = (objs) => {
  const all = Object.values(peers(objs)).slice(0, 3);
  const deny = objs.filter((o) => o.kind === 'NetworkPolicy' && all.every((l) => selects(o.spec.podSelector, l)) &&
    ['Ingress', 'Egress'].every((t) => (o.spec.policyTypes || []).includes(t)) &&
    !(o.spec.ingress || []).length && !(o.spec.egress || []).length);
  return deny.length ? [] : ['no NetworkPolicy denies all ingress and egress of every elastrain pod'];
};
checks['networkpolicy-ingress'] = networkCheck('Ingress');
checks['networkpolicy-egress'] = networkCheck('Egress');

checks['agents-on-spot-nodes'] = (objs) => {
  const a = agentSet(objs);
  if (!a) return ['no agent StatefulSet or Job'];
  const s = a.spec.template.spec;
  const p = [];
  if ((s.nodeSelector || {})['cloud.google.com/gke-spot'] !== 'true') p.push(`${id(a)}: no nodeSelector cloud.google.com/gke-spot: "true"`);
  if (!(s.tolerations || []).some((t) => t.key === 'cloud.google.com/gke-spot' && t.effect === 'NoSchedule' &&
    (t.operator === 'Exists' || t.value === 'true')))
    p.push(`${id(a)}: no toleration cloud.google.com/gke-spot=true:NoSchedule`);
  return p;
};

// ---- Mutations: each removes one property; the named check must then fail --------
const tmpl = (objs, c) => byComponent(objs, c)[0];
const ctr = (objs, c) => tmpl(objs, c).spec.containers[0];
const pol = (objs, name) => find(objs, 'NetworkPolicy', name);
const mutations = [
  ['ServiceAccount automounts its token', 'serviceaccount-without-token', (o) => { find(o, 'ServiceAccount', SA).automountServiceAccountToken = true; }],
  ['agent pod drops automountServiceAccountToken', 'pods-use-serviceaccount-without-token', (o) => { delete tmpl(o, 'agent').spec.automountServiceAccountToken; }],
  ['head pod uses the default ServiceAccount', 'pods-use-serviceaccount-without-token', (o) => { delete tmpl(o, 'head').spec.serviceAccountName; }],
  ['a RoleBinding grants the ServiceAccount a role', 'no-api-permissions', (o) => { o.push({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: { name: 'x' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' }, subjects: [{ kind: 'ServiceAccount', name: SA }] }); }],
  ['etcd container drops runAsNonRoot', 'run-as-non-root', (o) => { delete ctr(o, 'etcd').securityContext.runAsNonRoot; }],
  ['head container runs as uid 0', 'run-as-non-root', (o) => { ctr(o, 'head').securityContext.runAsUser = 0; }],
  ['agent root filesystem writable', 'read-only-root-filesystem', (o) => { ctr(o, 'agent').securityContext.readOnlyRootFilesystem = false; }],
  ['head drops allowPrivilegeEscalation', 'no-privilege-escalation', (o) => { delete ctr(o, 'head').securityContext.allowPrivilegeEscalation; }],
  ['agent keeps its capabilities', 'capabilities-drop-all', (o) => { delete ctr(o, 'agent').securityContext.capabilities; }],
  ['etcd pod drops its seccomp profile', 'seccomp-runtime-default', (o) => { delete tmpl(o, 'etcd').spec.securityContext.seccompProfile; }],
  ['etcd requests no memory', 'resource-requests', (o) => { delete ctr(o, 'etcd').resources.requests.memory; }],
  ['agent requests no cpu', 'resource-requests', (o) => { delete ctr(o, 'agent').resources.requests.cpu; }],
  ['head token Secret mounted with the default mode', 'secrets-mounted-restrictively', (o) => { delete tmpl(o, 'head').spec.volumes.find((v) => v.secret && v.secret.secretName === 'elastrain-api-token').secret.defaultMode; }],
  ['etcd TLS Secret world-readable', 'secrets-mounted-restrictively', (o) => { tmpl(o, 'etcd').spec.volumes.find((v) => v.secret).secret.defaultMode = 0o444; }],
  ['agent pod without fsGroup', 'secrets-mounted-restrictively', (o) => { delete tmpl(o, 'agent').spec.securityContext.fsGroup; }],
  ['head no longer mounts the API token', 'secrets-mounted-restrictively', (o) => { const t = tmpl(o, 'head'); t.spec.volumes = t.spec.volumes.filter((v) => !(v.secret && v.secret.secretName === 'elastrain-api-token')); }],
  ['token passed as an env value', 'no-secrets-in-env', (o) => { ctr(o, 'head').env.push({ name: 'ELASTRAIN_TOKEN', value: 'ab'.repeat(32) }); }],
  ['key passed from a Secret into env', 'no-secrets-in-env', (o) => { ctr(o, 'agent').env.push({ name: 'ETCD_KEY', valueFrom: { secretKeyRef: { name: 'elastrain-etcd-agent', key: 'tls.key' } } }); }],
  ['password passed from a Secret into env', 'no-secrets-in-env', (o) => { ctr(o, 'head').env.push({ name: 'ETCD_PASSWORD', valueFrom: { secretKeyRef: { name: 'elastrain-etcd-head', key: 'password' } } }); }],
  ['agent pod mounts the API token', 'secrets-only-where-needed', (o) => { tmpl(o, 'agent').spec.volumes.push({ name: 'tok', secret: { secretName: 'elastrain-api-token', defaultMode: 0o440 } }); }],
  ['agent pod mounts the head\'s etcd credentials', 'secrets-only-where-needed', (o) => { tmpl(o, 'agent').spec.volumes.find((v) => v.secret && v.secret.secretName === 'elastrain-etcd-agent').secret.secretName = 'elastrain-etcd-head'; }],
  ['agent pod mounts the head\'s signing key', 'secrets-only-where-needed', (o) => { tmpl(o, 'agent').spec.volumes.find((v) => v.secret && v.secret.secretName === 'elastrain-head-public-key').secret.secretName = 'elastrain-head-signing'; }],
  ['head pod mounts etcd\'s user passwords', 'secrets-only-where-needed', (o) => { tmpl(o, 'head').spec.volumes.push({ name: 'u', projected: { defaultMode: 0o440, sources: [{ secret: { name: 'elastrain-etcd-users' } }] } }); }],
  ['etcd never turns auth on', 'etcd-user-auth', (o) => { const c = ctr(o, 'etcd'); c.command = c.command.map((x) => x.replace('etcdctl auth enable', 'true')); }],
  ['the agents\' role may write everything', 'etcd-user-auth', (o) => { const c = ctr(o, 'etcd'); c.command = c.command.map((x) => x.replace('elastrain-agent --prefix=true read elastrain/', 'elastrain-agent --prefix=true readwrite elastrain/')); }],
  ['agents log in as the head', 'etcd-user-auth', (o) => { ctr(o, 'agent').env.find((e) => e.name === 'ELASTRAIN_ETCD_USER').value = 'elastrain-head'; }],
  ['agents without a password file', 'etcd-user-auth', (o) => { const c = ctr(o, 'agent'); c.env = c.env.filter((e) => e.name !== 'ELASTRAIN_ETCD_PASSWORD_FILE'); }],
  ['head and agents share one certificate', 'etcd-user-auth', (o) => { const h = find(o, 'Secret', 'elastrain-etcd-head'); const a = find(o, 'Secret', 'elastrain-etcd-agent'); a.data['tls.crt'] = h.data['tls.crt']; a.data['tls.key'] = h.data['tls.key']; }],
  ['agents\' etcd Secret lacks its password', 'secrets-exist', (o) => { delete find(o, 'Secret', 'elastrain-etcd-agent').data.password; }],
  ['checkpoints PVC ReadWriteOnce', 'checkpoints-readwritemany', (o) => { find(o, 'PersistentVolumeClaim', 'elastrain-checkpoints').spec.accessModes = ['ReadWriteOnce']; }],
  ['agent checkpoints on an emptyDir', 'checkpoints-readwritemany', (o) => { const v = tmpl(o, 'agent').spec.volumes.find((x) => x.persistentVolumeClaim); delete v.persistentVolumeClaim; v.emptyDir = {}; }],
  ['agent grace period equals the notice', 'agent-grace-exceeds-preemption-notice', (o) => { tmpl(o, 'agent').spec.terminationGracePeriodSeconds = 30; }],
  ['agent preemption-notice annotation removed', 'agent-grace-exceeds-preemption-notice', (o) => { delete tmpl(o, 'agent').meta.annotations[GRACE_ANNOTATION]; }],
  ['agent anti-affinity removed', 'agent-anti-affinity-per-host', (o) => { delete tmpl(o, 'agent').spec.affinity; }],
  ['agent POD_IP from the wrong field', 'agent-identity-from-downward-api', (o) => { ctr(o, 'agent').env.find((e) => e.name === 'POD_IP').valueFrom.fieldRef.fieldPath = 'status.hostIP'; }],
  ['PodDisruptionBudget removed', 'pdb-selects-agents', (o) => { o.splice(o.indexOf(o.find((x) => x.kind === 'PodDisruptionBudget')), 1); }],
  ['PodDisruptionBudget selects the head', 'pdb-selects-agents', (o) => { o.find((x) => x.kind === 'PodDisruptionBudget').spec.selector.matchLabels[COMPONENT] = 'head'; }],
  ['etcd without volumeClaimTemplates', 'etcd-volume-and-tls', (o) => { delete o.find((x) => x.kind === 'StatefulSet' && x.spec.volumeClaimTemplates).spec.volumeClaimTemplates; }],
  ['etcd without --client-cert-auth', 'etcd-volume-and-tls', (o) => { const c = ctr(o, 'etcd'); c.args = c.args.filter((a) => a !== '--client-cert-auth'); }],
  ['etcd without --peer-client-cert-auth', 'etcd-volume-and-tls', (o) => { const c = ctr(o, 'etcd'); c.args = c.args.filter((a) => a !== '--peer-client-cert-auth'); }],
  ['etcd listens on plain http', 'etcd-volume-and-tls', (o) => { const c = ctr(o, 'etcd'); c.args = c.args.map((a) => a.replace('--listen-client-urls=https://', '--listen-client-urls=http://')); }],
  ['agent reaches etcd over plain etcd://', 'clients-use-tls', (o) => { const c = ctr(o, 'agent'); c.args = c.args.map((a) => a.replace('etcds://', 'etcd://')); }],
  ['head serves plain HTTP', 'clients-use-tls', (o) => { const c = ctr(o, 'head'); c.args = c.args.filter((a) => !a.startsWith('--tls-cert=')); }],
  ['API token Secret holds no token', 'secrets-exist', (o) => { find(o, 'Secret', 'elastrain-api-token').data.token = Buffer.from('secret\n').toString('base64'); }],
  ['one head', 'standby-heads', (o) => { o.find((x) => x.kind === 'Deployment').spec.replicas = 1; }],
  ['head anti-affinity removed', 'standby-heads', (o) => { delete o.find((x) => x.kind === 'Deployment').spec.template.spec.affinity; }],
  ['heads replaced all at once', 'standby-heads', (o) => { o.find((x) => x.kind === 'Deployment').spec.strategy = { type: 'Recreate' }; }],
  ['default-deny NetworkPolicy removed', 'networkpolicy-default-deny', (o) => { o.splice(o.indexOf(pol(o, 'elastrain-default-deny')), 1); }],
  ['etcd policy accepts any source', 'networkpolicy-ingress', (o) => { delete pol(o, 'elastrain-etcd').spec.ingress[0].from; }],
  ['etcd policy accepts any port', 'networkpolicy-ingress', (o) => { delete pol(o, 'elastrain-etcd').spec.ingress[0].ports; }],
  ['etcd policy accepts any namespace', 'networkpolicy-ingress', (o) => { pol(o, 'elastrain-etcd').spec.ingress[0].from.push({ namespaceSelector: {} }); }],
  ['agent policy accepts every elastrain pod', 'networkpolicy-ingress', (o) => { delete pol(o, 'elastrain-agent').spec.ingress[0].from[0].podSelector.matchLabels[COMPONENT]; }],
  ['head policy no longer isolates ingress or egress', 'networkpolicy-ingress', (o) => { o.splice(o.indexOf(pol(o, 'elastrain-default-deny')), 1); pol(o, 'elastrain-head').spec.policyTypes = ['Egress']; }],
  ['agents may send anywhere', 'networkpolicy-egress', (o) => { pol(o, 'elastrain-agent').spec.egress.push({}); }],
  ['DNS policy opens every port', 'networkpolicy-egress', (o) => { delete pol(o, 'elastrain-dns').spec.egress[0].ports; }],
];
const gkeMutations = [
  ['agents lose the spot nodeSelector', 'agents-on-spot-nodes', (o) => { delete tmpl(o, 'agent').spec.nodeSelector; }],
  ['agents lose the spot toleration', 'agents-on-spot-nodes', (o) => { delete tmpl(o, 'agent').spec.tolerations; }],
];

// ---- Main ---------------------------------------------------------------------------
function canonical(objs) {
  const sortKeys = (x) => (Array.isArray(x) ? x.map(sortKeys) : x && typeof x === 'object'
    ? Object.fromEntries(Object.keys(x).sort().map((k) => [k, sortKeys(x[k])])) : x);
  return objs.map((o) => JSON.stringify(sortKeys(o))).sort();
}

function main(argv) {
  if (argv[0] === '--same') {
    const a = canonical(readObjects([argv[1]]));
    const b = canonical(readObjects([argv[2]]));
    const onlyA = a.filter((x) => !b.includes(x));
    const onlyB = b.filter((x) => !a.includes(x));
    if (!onlyA.length && !onlyB.length) { console.log(`SAME ${a.length} objects: ${argv[1]} ${argv[2]}`); return 0; }
    for (const x of onlyA) console.log(`ONLY in ${argv[1]}: ${x.slice(0, 300)}`);
    for (const x of onlyB) console.log(`ONLY in ${argv[2]}: ${x.slice(0, 300)}`);
    return 1;
  }
  const gke = argv[0] === '--gke';
  const files = gke ? argv.slice(1) : argv;
  const objs = readObjects(files);
  let failures = 0;
  const report = (ok, what, detail) => {
    console.log(`${ok ? 'PASS' : 'FAIL'} ${what}${detail ? ': ' + detail : ''}`);
    if (!ok) failures++;
  };
  for (const o of objs) {
    const errs = schemaErrors(o);
    report(errs.length === 0, `schema ${o.apiVersion} ${id(o)}`, errs.join('; '));
  }
  const active = Object.keys(checks).filter((n) => gke || n !== 'agents-on-spot-nodes');
  for (const name of active) {
    const p = checks[name](objs);
    report(p.length === 0, `check ${name}`, p.join('; '));
  }
  const ms = gke ? [...mutations, ...gkeMutations] : mutations;
  const covered = new Set();
  for (const [what, name, mutate] of ms) {
    const m = clone(objs);
    let p;
    try {
      mutate(m);
      p = checks[name](m);
    } catch (e) {
      p = null;
      report(false, `mutation "${what}"`, `could not be applied (${e.message}): has the manifest changed shape?`);
      continue;
    }
    covered.add(name);
    report(p.length > 0, `mutation "${what}" is caught by ${name}`, p.length ? '' : 'the check still passes');
  }
  for (const name of active) if (!covered.has(name)) report(false, `check ${name} has a mutation`, 'none');
  console.log(`validate: ${objs.length} objects, ${active.length} checks, ${ms.length} mutations: ${failures ? failures + ' FAILED' : 'all passed'}`);
  return failures ? 1 : 0;
}

try {
  process.exitCode = main(process.argv.slice(2));
} catch (e) {
  console.log(`FAIL validate: ${e.message}`);
  process.exitCode = 1;
}

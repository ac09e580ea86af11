/**
 * The deployment files (docs/deploy.md), checked offline: the Kubernetes manifests against the Kubernetes OpenAPI
 * schemas (kubernetes-models) and against each other, the kustomizations resolved (and built by `kubectl kustomize`
 * where a kubectl is installed), deploy/nginx/voxd.conf by `nginx -t` and by a real nginx in front of stand-in
 * instances, and the Dockerfiles by parsing them. Nothing here needs a cluster, a container engine or the network.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import type { IHorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import type { IIngress } from 'kubernetes-models/networking.k8s.io/v1/Ingress';
import type { IPodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import type { IPersistentVolumeClaim } from 'kubernetes-models/v1/PersistentVolumeClaim';
import type { IService } from 'kubernetes-models/v1/Service';
import type { IScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject';
import ts from 'typescript';
import WebSocket, { WebSocketServer } from 'ws';
import { parseAllDocuments } from 'yaml';
import { resolveConfig, SERVE_SETTINGS, type Config } from '../../src/config.js';
import { Metrics } from '../../src/services/metrics.js';
import { Scheduler } from '../../src/services/scheduler.js';
import { NGINX, NGINX_CONF, NO_NGINX, startNginx, type RunningNginx } from '../helpers/nginx.js';
import { ROOT } from '../helpers/paths.js';
import { freePort } from '../helpers/process.js';

const KUBE = path.join(ROOT, 'deploy', 'kubernetes');
const DEFAULTS = resolveConfig({}, {});

// ---- YAML and the Kubernetes schemas ----

interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata?: { name?: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
}

interface Document {
  file: string;
  value: unknown;
}

/** The documents of a YAML file, parsed strictly (a YAML error fails). */
function yamlFile(file: string): Document[] {
  return parseAllDocuments(fs.readFileSync(file, 'utf8'), { prettyErrors: true }).map((doc) => {
    assert.deepEqual(doc.errors, [], `${path.relative(ROOT, file)}: YAML errors`);
    return { file: path.relative(ROOT, file), value: doc.toJS() as unknown };
  });
}

/** Every document of every YAML file under `dir`. */
function yamlDocuments(dir: string): Document[] {
  return fs
    .readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => /\.ya?ml$/.test(f))
    .sort()
    .flatMap((f) => yamlFile(path.join(dir, f)));
}

const isKubeObject = (value: unknown): value is KubeObject =>
  typeof value === 'object' && value !== null && typeof (value as KubeObject).apiVersion === 'string' && typeof (value as KubeObject).kind === 'string';

/** The kubernetes-models module of each kind the manifests use: its class validates, its interface type-checks. */
const MODELS: Record<string, string> = {
  'v1/Namespace': 'kubernetes-models/v1/Namespace',
  'v1/Service': 'kubernetes-models/v1/Service',
  'v1/PersistentVolumeClaim': 'kubernetes-models/v1/PersistentVolumeClaim',
  'apps/v1/Deployment': 'kubernetes-models/apps/v1/Deployment',
  'autoscaling/v2/HorizontalPodAutoscaler': 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler',
  'policy/v1/PodDisruptionBudget': 'kubernetes-models/policy/v1/PodDisruptionBudget',
  'networking.k8s.io/v1/Ingress': 'kubernetes-models/networking.k8s.io/v1/Ingress',
  'keda.sh/v1alpha1/ScaledObject': '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject',
};
/** Kinds no kubernetes-models package here covers: checked structurally by the tests below. */
const STRUCTURAL_KINDS = ['kustomize.config.k8s.io/v1beta1/Kustomization', 'kustomize.config.k8s.io/v1alpha1/Component', 'monitoring.coreos.com/v1/PodMonitor'];

const kindKey = (object: KubeObject): string => `${object.apiVersion}/${object.kind}`;

type ModelClass = new (data: unknown) => { validate(): void };

/** Validates with the kind's compiled OpenAPI schema: types, formats (quantities, ...), enums, required fields. */
async function validateWithSchema(object: KubeObject): Promise<void> {
  const module = MODELS[kindKey(object)];
  assert.ok(module, `no schema for ${kindKey(object)}`);
  const exports = (await import(module)) as Record<string, ModelClass>;
  const Model = exports[object.kind];
  assert.ok(Model, `${module} exports no ${object.kind}`);
  new Model(object).validate();
}

/**
 * Fields the schemas do not know. The OpenAPI schemas allow unknown fields (the API server drops them, or refuses
 * them under strict field validation), so the objects are also type-checked as object literals of the models'
 * TypeScript interfaces, whose excess-property check names every unknown field at any depth.
 */
function unknownFields(objects: { label: string; object: KubeObject }[]): string[] {
  const sources = new Map<string, string>();
  const labels = new Map<string, string>();
  objects.forEach(({ label, object }, i) => {
    const module = MODELS[kindKey(object)];
    assert.ok(module, `no schema for ${kindKey(object)}`);
    const file = path.join(ROOT, 'test', 'unit', `__deploy_object_${i}.ts`); // virtual: resolves node_modules from here
    sources.set(file, `import type { I${object.kind} } from '${module}';\nexport const object: I${object.kind} = ${JSON.stringify(object, null, 2)};\n`);
    labels.set(file, label);
  });
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
  };
  const host = ts.createCompilerHost(options);
  const { fileExists, readFile, getSourceFile } = host;
  host.fileExists = (file) => sources.has(file) || fileExists.call(host, file);
  host.readFile = (file) => sources.get(file) ?? readFile.call(host, file);
  host.getSourceFile = (file, language, ...rest) => {
    const source = sources.get(file);
    return source === undefined ? getSourceFile.call(host, file, language, ...rest) : ts.createSourceFile(file, source, language);
  };
  const program = ts.createProgram([...sources.keys()], options, host);
  return ts
    .getPreEmitDiagnostics(program)
    .map((d) => `${labels.get(d.file?.fileName ?? '') ?? d.file?.fileName}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`);
}

// ---- kustomize, resolved here ----

interface Kustomization extends KubeObject {
  namespace?: string;
  resources?: string[];
  components?: string[];
  patches?: { patch?: string; path?: string; target?: unknown }[];
  images?: { name: string; newName?: string; newTag?: string }[];
}

const KUSTOMIZATION_FIELDS = new Set(['apiVersion', 'kind', 'metadata', 'namespace', 'resources', 'components', 'patches', 'images']);

function readKustomization(dir: string): Kustomization {
  const file = path.join(dir, 'kustomization.yaml');
  assert.ok(fs.existsSync(file), `${path.relative(ROOT, dir)} has no kustomization.yaml`);
  const [doc, ...more] = yamlFile(file);
  assert.equal(more.length, 0, `${path.relative(ROOT, file)}: one document`);
  const kustomization = doc?.value as Kustomization;
  const unsupported = Object.keys(kustomization).filter((field) => !KUSTOMIZATION_FIELDS.has(field));
  assert.deepEqual(unsupported, [], `${path.relative(ROOT, file)}: fields this test does not resolve`);
  return kustomization;
}

/** Applies a component or kustomization's own transformations (patches, namespace, images) to `objects`. */
function transform(kustomization: Kustomization, dir: string, objects: KubeObject[]): KubeObject[] {
  let result = objects;
  for (const { patch, path: patchFile } of kustomization.patches ?? []) {
    assert.ok(patch !== undefined && patchFile === undefined, `${path.relative(ROOT, dir)}: only inline patches are resolved here`);
    const target = parseAllDocuments(patch)[0]?.toJS() as KubeObject & { $patch?: string };
    assert.equal(target.$patch, 'delete', `${path.relative(ROOT, dir)}: only \`$patch: delete\` patches are resolved here`);
    const before = result.length;
    result = result.filter((o) => !(kindKey(o) === kindKey(target) && o.metadata?.name === target.metadata?.name));
    assert.equal(result.length, before - 1, `${path.relative(ROOT, dir)}: the patch deletes ${kindKey(target)} ${target.metadata?.name}, which is not there`);
  }
  if (kustomization.namespace) {
    result = result.map((o) => (o.kind === 'Namespace' ? o : { ...o, metadata: { ...o.metadata, namespace: kustomization.namespace } }));
  }
  for (const image of kustomization.images ?? []) {
    const deployments = result.filter((o): o is KubeObject & IDeployment => o.kind === 'Deployment');
    const containers = deployments.flatMap((d) => d.spec?.template.spec?.containers ?? []).filter((c) => c.image?.split(':')[0] === image.name);
    assert.ok(containers.length > 0, `${path.relative(ROOT, dir)}: images names ${image.name}, which no container uses`);
    for (const c of containers) c.image = `${image.newName ?? image.name}:${image.newTag ?? c.image?.split(':')[1] ?? 'latest'}`;
  }
  return result;
}

/** Builds a kustomization directory as kustomize would, for the features these files use (checked above). */
function build(dir: string, expectedKind = 'Kustomization'): KubeObject[] {
  const kustomization = readKustomization(dir);
  assert.equal(kustomization.kind, expectedKind, `${path.relative(ROOT, dir)}: kind`);
  let objects: KubeObject[] = [];
  for (const resource of kustomization.resources ?? []) {
    const target = path.resolve(dir, resource);
    assert.ok(fs.existsSync(target), `${path.relative(ROOT, dir)}: resource ${resource} does not exist`);
    if (fs.statSync(target).isDirectory()) objects.push(...build(target));
    else
      objects.push(
        ...yamlFile(target)
          .map((d) => d.value)
          .filter(isKubeObject),
      );
  }
  for (const component of kustomization.components ?? []) {
    const componentDir = path.resolve(dir, component);
    assert.ok(fs.existsSync(componentDir), `${path.relative(ROOT, dir)}: component ${component} does not exist`);
    objects.push(...build(componentDir, 'Component'));
    objects = transform(readKustomization(componentDir), componentDir, objects);
  }
  // a component's resources join the objects of the kustomization that uses it, whose build then transforms them all
  return expectedKind === 'Component' ? objects : transform(kustomization, dir, objects);
}

const names = (objects: KubeObject[]): string[] => objects.map((o) => `${o.kind}/${o.metadata?.name}`).sort();
const one = <T>(objects: KubeObject[], kind: string): KubeObject & T => {
  const found = objects.filter((o) => o.kind === kind);
  assert.equal(found.length, 1, `one ${kind}`);
  return found[0] as KubeObject & T;
};
const selects = (selector: Record<string, string> | undefined, labels: Record<string, string> | undefined): boolean =>
  selector !== undefined && Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels?.[k] === v);

/** A kustomization (in a temporary directory) of the base and the given components, to build them together. */
function withComponents(components: string[]): { dir: string; cleanup: () => void } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-kustomize-'));
  const relative = (p: string): string => path.relative(dir, path.join(KUBE, p));
  fs.writeFileSync(
    path.join(dir, 'kustomization.yaml'),
    JSON.stringify({
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      resources: [relative('base')],
      components: components.map((c) => relative(path.join('components', c))),
    }),
  );
  return { dir, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

const COMPONENTS = fs.readdirSync(path.join(KUBE, 'components')).sort();
const OVERLAYS = fs.readdirSync(path.join(KUBE, 'overlays')).sort();

// ---- voxd's flags ----

/** `--flag=value` / `--flag value` / `--switch` arguments of `voxd serve`, by flag. */
function serveFlags(args: string[]): Map<string, string | true> {
  const flags = new Map<string, string | true>();
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    assert.ok(arg.startsWith('--'), `a flag, not ${arg}`);
    const eq = arg.indexOf('=');
    if (eq > 0) flags.set(arg.slice(0, eq), arg.slice(eq + 1));
    else if (args[i + 1] !== undefined && !args[i + 1]?.startsWith('--')) flags.set(arg, args[++i] ?? '');
    else flags.set(arg, true);
  }
  return flags;
}

/** Checks that voxd serve knows every flag and takes its value; returns the settings they make. */
function checkServeFlags(args: string[], where: string): Config {
  const byFlag = new Map<string, keyof Config>(Object.entries(SERVE_SETTINGS).map(([key, setting]) => [setting.flag, key as keyof Config]));
  const values: Partial<Record<keyof Config, unknown>> = {};
  for (const [flag, value] of serveFlags(args)) {
    const key = byFlag.get(flag);
    assert.ok(key, `${where}: voxd serve has no ${flag}`);
    values[key] = value;
  }
  return resolveConfig(values, {});
}

// ---- Dockerfiles ----

interface Instruction {
  keyword: string;
  args: string;
}
interface Stage {
  base: string;
  name: string | null;
  instructions: Instruction[];
}

/** The instructions of a Dockerfile by stage, continuation lines joined, comments dropped, build ARGs of FROM substituted. */
function parseDockerfile(file: string): Stage[] {
  const logical: string[] = [];
  let pending = '';
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (/^\s*#/.test(line)) continue; // comments, also between continuation lines
    const continued = /\\\s*$/.test(line);
    pending += `${continued ? line.replace(/\\\s*$/, '') : line} `;
    if (!continued) {
      if (pending.trim()) logical.push(pending.trim().replace(/\s+/g, ' '));
      pending = '';
    }
  }
  const globalArgs = new Map<string, string>();
  const stages: Stage[] = [];
  for (const line of logical) {
    const [keyword = '', ...rest] = line.split(' ');
    const args = rest.join(' ');
    if (keyword.toUpperCase() === 'FROM') {
      // FROM's flags (--platform) say where the stage runs, not what it starts from
      const words = args.replace(/\$\{(\w+)\}/g, (_, arg: string) => globalArgs.get(arg) ?? `\${${arg}}`).split(' ');
      const [image = '', as, name] = words.filter((word) => !word.startsWith('--'));
      stages.push({ base: image, name: as?.toUpperCase() === 'AS' ? (name ?? null) : null, instructions: [] });
    } else if (stages.length === 0) {
      assert.equal(keyword.toUpperCase(), 'ARG', `${path.basename(file)}: only ARG before the first FROM`);
      const [arg = '', value = ''] = args.split('=');
      globalArgs.set(arg, value.replace(/^"(.*)"$/, '$1'));
    } else {
      stages.at(-1)?.instructions.push({ keyword: keyword.toUpperCase(), args });
    }
  }
  return stages;
}

const instructions = (stage: Stage, keyword: string): string[] => stage.instructions.filter((i) => i.keyword === keyword).map((i) => i.args);
const only = (stage: Stage, keyword: string): string => {
  const found = instructions(stage, keyword);
  assert.equal(found.length, 1, `one ${keyword} in stage ${stage.name}`);
  return found[0] ?? '';
};

/** The packages `apt-get install` installs in a stage. */
function aptPackages(stage: Stage): string[] {
  return instructions(stage, 'RUN').flatMap((run) =>
    run
      .split('&&')
      .filter((command) => /\bapt-get install\b/.test(command))
      .flatMap((command) =>
        command
          .slice(command.indexOf('install') + 'install'.length)
          .trim()
          .split(' '),
      )
      .filter((word) => word && !word.startsWith('-')),
  );
}

/** ENV's `NAME=value` pairs of a stage. */
function envOf(stage: Stage): Map<string, string> {
  return new Map(instructions(stage, 'ENV').flatMap((env) => env.split(' ').map((pair) => pair.split('=') as [string, string])));
}

/** The JSON (exec) form of CMD or of HEALTHCHECK's CMD. */
function execForm(text: string): string[] {
  const json = text.slice(text.indexOf('['));
  const parsed = JSON.parse(json) as unknown;
  assert.ok(Array.isArray(parsed) && parsed.every((a) => typeof a === 'string'), `exec form (JSON array): ${text}`);
  return parsed as string[];
}

interface SystemDep {
  what: string;
  debian: string;
  optional?: boolean;
}

async function systemDeps(): Promise<SystemDep[]> {
  const module = (await import(pathToFileURL(path.join(ROOT, 'scripts', 'system-deps.mjs')).href)) as { SYSTEM_DEPS: SystemDep[] };
  return module.SYSTEM_DEPS;
}

/** The checks both images share: the runtime stage of a built app, run by uid 10001, as the manifests expect. */
async function checkImage(file: string, { buildBase, runtimeBase }: { buildBase: RegExp; runtimeBase: RegExp }): Promise<void> {
  const stages = parseDockerfile(path.join(ROOT, file));
  const build = stages.find((s) => s.name === 'build');
  const runtime = stages.at(-1);
  assert.ok(build && runtime && runtime !== build, `${file}: a build stage and a runtime stage after it`);
  assert.match(build.base, buildBase, `${file}: build stage base`);
  assert.match(runtime.base, runtimeBase, `${file}: runtime stage base`);

  // build: the system packages the native build checks for, then npm ci (builds the addon) and a prune
  const deps = await systemDeps();
  const buildPackages = aptPackages(build);
  const needed = deps.filter((d) => !d.optional || /run time/.test(d.what)).map((d) => d.debian);
  assert.deepEqual(
    needed.filter((p) => !buildPackages.includes(p)),
    [],
    `${file}: build stage lacks packages of scripts/system-deps.mjs`,
  );
  const buildRun = instructions(build, 'RUN').join(' && ');
  assert.match(buildRun, /\bnpm ci\b/, `${file}: npm ci`);
  assert.match(buildRun, /\bnpm prune --omit=dev\b/, `${file}: dev dependencies pruned`);
  assert.ok(buildRun.indexOf('npm ci') < buildRun.indexOf('npm prune'), `${file}: prune after npm ci`);

  // runtime: run-time libraries only
  const runtimePackages = aptPackages(runtime);
  for (const library of ['libavformat', 'libavcodec', 'libswresample', 'libavutil']) {
    assert.ok(
      runtimePackages.some((p) => new RegExp(`^${library}\\d+$`).test(p)),
      `${file}: runtime has ${library}'s run-time package (${runtimePackages.join(' ')})`,
    );
  }
  for (const dep of deps.filter((d) => d.optional && /run time/.test(d.what))) {
    assert.ok(runtimePackages.includes(dep.debian), `${file}: runtime has ${dep.debian} (${dep.what})`);
  }
  const buildOnly = runtimePackages.filter((p) => p.endsWith('-dev') || ['cmake', 'gcc', 'g++', 'git', 'ninja-build', 'pkg-config'].includes(p));
  assert.deepEqual(buildOnly, [], `${file}: no build packages at run time`);

  // the app: what package.json ships to run (dist/, ui/dist), node_modules and the addon where node-gyp-build looks
  const copies = instructions(runtime, 'COPY');
  assert.deepEqual(
    copies.filter((c) => !c.startsWith('--from=')),
    [],
    `${file}: the runtime stage copies nothing from the build context`,
  );
  const copied = copies.filter((c) => c.startsWith('--from=build ')).map((c) => c.split(' ')[1]?.replace(/^\/app\//, ''));
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { files: string[]; bin: { voxd: string } };
  for (const needed of [...pkg.files.filter((f) => f.startsWith('dist/') || f === 'ui/dist'), 'node_modules', 'package.json', 'build/Release/voxd.node']) {
    assert.ok(copied.includes(needed), `${file}: runtime has ${needed}`);
  }

  // how it runs
  assert.equal(only(runtime, 'WORKDIR'), '/app', `${file}: WORKDIR`);
  assert.match(only(runtime, 'USER'), /^10001(:10001)?$/, `${file}: a numeric non-root user, so runAsNonRoot can check it`);
  assert.equal(only(runtime, 'EXPOSE'), '8000', `${file}: EXPOSE`);
  assert.equal(only(runtime, 'STOPSIGNAL'), 'SIGTERM', `${file}: STOPSIGNAL`);
  assert.equal(envOf(runtime).get('HF_HOME'), '/models', `${file}: HF_HOME`);
  assert.deepEqual(execForm(only(runtime, 'VOLUME')), ['/models'], `${file}: VOLUME`);
  const healthcheck = only(runtime, 'HEALTHCHECK');
  const probe = execForm(healthcheck.slice(healthcheck.indexOf(' CMD ')));
  assert.equal(probe[0], 'node', `${file}: the health check runs node (the image has no curl)`);
  assert.match(probe.join(' '), /http:\/\/127\.0\.0\.1:8000\/healthz/, `${file}: the health check asks /healthz`);
  const cmd = execForm(only(runtime, 'CMD'));
  assert.deepEqual(cmd, ['node', pkg.bin.voxd, 'serve', '--host', '0.0.0.0'], `${file}: CMD`);
  const config = checkServeFlags(cmd.slice(3), `${file} CMD`);
  assert.equal(config.port, 8000, `${file}: voxd's port is the one exposed`);
  assert.equal(config.logDir, 'logs', `${file}: logs under WORKDIR (/app/logs, made writable for uid 10001)`);
  assert.match(instructions(runtime, 'RUN').join(' '), /--uid 10001\b.*chown 10001:10001 \/models \/app\/logs/, `${file}: the user owns /models and /app/logs`);
}

// ---- nginx ----

/** The conf's directives, flattened: `name args` per statement, comments dropped. */
function nginxDirectives(text: string): string[] {
  return text
    .replace(/#.*$/gm, '')
    .split(/[;{}]/)
    .map((s) => s.trim().replace(/\s+/g, ' '))
    .filter(Boolean);
}
const directive = (directives: string[], name: string): string[] => directives.filter((d) => d.split(' ')[0] === name).map((d) => d.slice(name.length).trim());

const seconds = (value: string): number => {
  const match = /^(\d+)(ms|s|m|h)?$/.exec(value);
  assert.ok(match, `an nginx time: ${value}`);
  const unit: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600 };
  return Number(match[1]) * (unit[match[2] ?? 's'] ?? NaN);
};

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

function request(port: number, method: string, urlPath: string, body?: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: urlPath, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('deployment files', () => {
  const documents = yamlDocuments(KUBE);
  const objects = documents.filter((d) => isKubeObject(d.value)).map((d) => ({ label: d.file, object: d.value as KubeObject }));
  const schemaObjects = objects.filter(({ object }) => MODELS[kindKey(object)]);

  describe('Kubernetes (deploy/kubernetes)', () => {
    it("parses every YAML file, and every object validates against its kind's OpenAPI schema", async () => {
      assert.ok(documents.length >= 10, 'the manifests are there');
      for (const { label, object } of objects) {
        const key = kindKey(object);
        assert.ok(MODELS[key] || STRUCTURAL_KINDS.includes(key), `${label}: ${key} is neither validated nor checked here`);
        if (MODELS[key]) await validateWithSchema(object).catch((error: Error) => assert.fail(`${label}: ${key}: ${error.message}`));
      }
      const kinds = new Set(objects.map(({ object }) => object.kind));
      for (const kind of ['Deployment', 'Service', 'PersistentVolumeClaim', 'HorizontalPodAutoscaler', 'PodDisruptionBudget', 'Ingress', 'ScaledObject']) {
        assert.ok(kinds.has(kind), `a ${kind}`);
      }
    });

    it('uses no field the schemas do not know', () => {
      assert.deepEqual(unknownFields(schemaObjects), []);
    });

    it('the checks catch a mistyped and a misspelt field', async () => {
      const deployment = structuredClone(one<IDeployment>(build(path.join(KUBE, 'base')), 'Deployment'));
      const container = deployment.spec?.template.spec?.containers[0];
      assert.ok(container);
      const mistyped = structuredClone(deployment);
      (mistyped.spec?.template.spec?.containers[0]?.resources?.limits ?? {}).cpu = 'two';
      await assert.rejects(validateWithSchema(mistyped), /quantity/);
      const misspelt = structuredClone(deployment) as KubeObject;
      Object.assign(((misspelt as IDeployment).spec?.template.spec?.containers ?? [])[0] ?? {}, { readinesProbe: container.readinessProbe });
      assert.match(unknownFields([{ label: 'misspelt', object: misspelt }]).join('\n'), /'"?readinesProbe"?' does not exist/);
    });

    it('checks what no schema here covers: the kustomizations, the PodMonitor, the prometheus-adapter rules', () => {
      for (const { label, object } of objects.filter(({ object }) => object.kind === 'PodMonitor')) {
        const spec = object.spec as { selector?: { matchLabels?: Record<string, string> }; podMetricsEndpoints?: { port?: string; path?: string }[] };
        assert.ok(spec.selector?.matchLabels && spec.podMetricsEndpoints?.length, `${label}: selector and endpoints`);
        assert.deepEqual(
          spec.podMetricsEndpoints.map((e) => [e.port, e.path]),
          [['http', '/metrics']],
          `${label}: scrapes /metrics on the named port`,
        );
      }
      const adapter = documents.filter((d) => d.file.endsWith('prometheus-adapter-rules.yaml'));
      assert.equal(adapter.length, 1);
      const values = adapter[0]?.value as {
        prometheus: { url: string; port: number };
        rules: {
          custom: {
            seriesQuery: string;
            resources: { overrides: Record<string, { resource: string }> };
            name: { matches: string; as: string };
            metricsQuery: string;
          }[];
        };
      };
      assert.match(values.prometheus.url, /^https?:\/\//);
      assert.equal(typeof values.prometheus.port, 'number');
      const [rule, ...others] = values.rules.custom;
      assert.ok(rule && others.length === 0, 'one rule');
      assert.match(rule.seriesQuery, /^voxd_queue_depth\{.*namespace!="".*pod!="".*\}$/);
      assert.deepEqual(rule.resources.overrides, { namespace: { resource: 'namespace' }, pod: { resource: 'pod' } }, 'the series map to pods');
      assert.ok(new RegExp(rule.name.matches).test('voxd_queue_depth'));
      for (const part of ['<<.Series>>', '<<.LabelMatchers>>', '<<.GroupBy>>']) assert.ok(rule.metricsQuery.includes(part), `metricsQuery has ${part}`);
      assert.match(rule.metricsQuery, /^sum\(/, "a pod's models summed");
    });

    it('resolves the base, each component and each overlay: every file named exists, and the objects refer to each other', () => {
      const base = build(path.join(KUBE, 'base'));
      assert.deepEqual(names(base), [
        'Deployment/voxd',
        'HorizontalPodAutoscaler/voxd',
        'PersistentVolumeClaim/voxd-models',
        'PodDisruptionBudget/voxd',
        'Service/voxd',
      ]);
      const builds = [
        { label: 'base', objects: base },
        ...COMPONENTS.map((c) => {
          const { dir, cleanup } = withComponents([c]);
          try {
            return { label: `base + ${c}`, objects: build(dir) };
          } finally {
            cleanup();
          }
        }),
        ...OVERLAYS.map((o) => ({ label: `overlays/${o}`, objects: build(path.join(KUBE, 'overlays', o)) })),
      ];
      for (const { label, objects } of builds) {
        const deployment = one<IDeployment>(objects, 'Deployment');
        const podLabels = deployment.spec?.template.metadata?.labels;
        const podSpec = deployment.spec?.template.spec;
        assert.ok(selects(deployment.spec?.selector.matchLabels, podLabels), `${label}: the Deployment selects its pods`);
        const service = one<IService>(objects, 'Service');
        assert.ok(selects(service.spec?.selector, podLabels), `${label}: the Service selects the pods`);
        const portNames = podSpec?.containers.flatMap((c) => c.ports?.map((p) => p.name) ?? []) ?? [];
        for (const port of service.spec?.ports ?? []) assert.ok(portNames.includes(String(port.targetPort)), `${label}: Service targetPort ${port.targetPort}`);
        assert.ok(
          selects(one<IPodDisruptionBudget>(objects, 'PodDisruptionBudget').spec?.selector?.matchLabels, podLabels),
          `${label}: the PDB selects the pods`,
        );
        const claim = podSpec?.volumes?.find((v) => v.persistentVolumeClaim)?.persistentVolumeClaim?.claimName;
        assert.equal(claim, one<IPersistentVolumeClaim>(objects, 'PersistentVolumeClaim').metadata?.name, `${label}: the model cache claim exists`);
        const scalers = objects.filter((o) => o.kind === 'HorizontalPodAutoscaler' || o.kind === 'ScaledObject');
        assert.equal(scalers.length, 1, `${label}: one autoscaler (KEDA's ScaledObject replaces the HPA)`);
        const target = (scalers[0] as KubeObject & (IHorizontalPodAutoscaler | IScaledObject)).spec?.scaleTargetRef;
        assert.deepEqual(
          [target?.apiVersion, target?.kind, target?.name],
          ['apps/v1', 'Deployment', deployment.metadata?.name],
          `${label}: scales the Deployment`,
        );
        for (const ingress of objects.filter((o): o is KubeObject & IIngress => o.kind === 'Ingress')) {
          for (const backend of ingress.spec?.rules?.flatMap((r) => r.http?.paths.map((p) => p.backend.service) ?? []) ?? []) {
            assert.equal(backend?.name, service.metadata?.name, `${label}: the Ingress sends to the Service`);
            assert.ok(
              service.spec?.ports?.some((p) => p.name === backend?.port?.name || p.port === backend?.port?.number),
              `${label}: the Ingress names a Service port`,
            );
          }
        }
        const namespaces = new Set(objects.filter((o) => o.kind !== 'Namespace').map((o) => o.metadata?.namespace));
        assert.equal(namespaces.size, 1, `${label}: one namespace for all`);
      }
    });

    const kubectl = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' }).status === 0;
    it('builds the same objects with kubectl kustomize', { skip: kubectl ? false : 'no kubectl on PATH (the resolution above still ran)' }, () => {
      const kustomize = (dir: string): KubeObject[] => {
        const run = spawnSync('kubectl', ['kustomize', dir], { encoding: 'utf8' });
        assert.equal(run.status, 0, `kubectl kustomize ${dir}: ${run.stderr}`);
        return parseAllDocuments(run.stdout).map((d) => d.toJS() as KubeObject);
      };
      const images = (objects: KubeObject[]): (string | undefined)[] =>
        objects
          .filter((o): o is KubeObject & IDeployment => o.kind === 'Deployment')
          .flatMap((d) => d.spec?.template.spec?.containers.map((c) => c.image) ?? []);
      const dirs = [path.join(KUBE, 'base'), ...OVERLAYS.map((o) => path.join(KUBE, 'overlays', o))];
      for (const dir of dirs) {
        const built = kustomize(dir);
        assert.deepEqual(names(built), names(build(dir)), path.relative(ROOT, dir));
        assert.deepEqual(images(built), images(build(dir)), `${path.relative(ROOT, dir)}: images`);
        assert.deepEqual(
          built.map((o) => o.metadata?.namespace ?? null).sort(),
          build(dir)
            .map((o) => o.metadata?.namespace ?? null)
            .sort(),
        );
      }
      const { dir, cleanup } = withComponents(COMPONENTS);
      try {
        assert.deepEqual(names(kustomize(dir)), names(build(dir)), `base + ${COMPONENTS.join(' + ')}`);
      } finally {
        cleanup();
      }
    });

    it('the pod runs the image as built, shuts down within its grace period, and has the probes and volumes it needs', () => {
      const deployment = one<IDeployment>(build(path.join(KUBE, 'base')), 'Deployment');
      const pod = deployment.spec?.template.spec;
      const [container, ...sidecars] = pod?.containers ?? [];
      assert.ok(pod && container && sidecars.length === 0);

      // as the Dockerfile builds it
      const runtime = parseDockerfile(path.join(ROOT, 'Dockerfile')).at(-1);
      assert.ok(runtime);
      assert.deepEqual(container.command, execForm(only(runtime, 'CMD')).slice(0, 2), "the image's command");
      assert.equal(container.args?.[0], 'serve');
      const config = checkServeFlags(container.args?.slice(1) ?? [], 'Deployment args');
      assert.equal(config.host, '0.0.0.0');
      assert.equal(String(config.port), only(runtime, 'EXPOSE'));
      assert.deepEqual(
        container.ports?.map((p) => [p.name, p.containerPort]),
        [['http', config.port]],
      );
      assert.equal(config.modelConcurrency, Number(container.resources?.limits?.cpu), "--model-concurrency is the CPU limit, not the node's cores");

      // shutdown: preStop, then SIGTERM; voxd serves on for --drain-grace-s, then drains for at most --drain-timeout-s
      const preStop = container.lifecycle?.preStop?.exec?.command;
      assert.deepEqual(preStop?.slice(0, 1), ['sleep']);
      assert.ok(config.drainGraceS > 0, 'a drain grace, while the proxies stop sending');
      const shutdownSeconds = Number(preStop?.[1]) + config.drainGraceS + config.drainTimeoutS;
      assert.ok(Number.isFinite(shutdownSeconds), 'the preStop sleep is a number');
      assert.ok(
        (pod.terminationGracePeriodSeconds ?? 30) > shutdownSeconds,
        `terminationGracePeriodSeconds ${pod.terminationGracePeriodSeconds} > ${shutdownSeconds}`,
      );

      // probes
      assert.equal(container.readinessProbe?.httpGet?.path, '/readyz');
      assert.equal(container.livenessProbe?.httpGet?.path, '/healthz');
      assert.equal(container.startupProbe?.httpGet?.path, '/healthz');
      for (const probe of [container.readinessProbe, container.livenessProbe, container.startupProbe]) assert.equal(probe?.httpGet?.port, 'http');

      // user, file system, resources
      const uid = Number(only(runtime, 'USER').split(':')[0]);
      assert.equal(pod.securityContext?.runAsNonRoot, true);
      assert.equal(pod.securityContext?.runAsUser, uid, "the image's user");
      assert.equal(container.securityContext?.readOnlyRootFilesystem, true);
      assert.equal(container.securityContext?.allowPrivilegeEscalation, false);
      const mounts = new Map(container.volumeMounts?.map((m) => [m.mountPath, m.name]));
      const volumes = new Map(pod.volumes?.map((v) => [v.name, v]));
      const hfHome = container.env?.find((e) => e.name === 'HF_HOME')?.value;
      assert.equal(hfHome, envOf(runtime).get('HF_HOME'));
      assert.ok(volumes.get(mounts.get(hfHome ?? '') ?? '')?.persistentVolumeClaim, 'HF_HOME is on the shared claim');
      const logDir = path.posix.join(only(runtime, 'WORKDIR'), config.logDir);
      assert.ok(volumes.get(mounts.get(logDir) ?? '')?.emptyDir, `${logDir} is writable on a read-only root`);
      assert.ok(volumes.get(mounts.get('/tmp') ?? '')?.emptyDir, '/tmp is writable on a read-only root');
      for (const kind of ['requests', 'limits'] as const) {
        assert.ok(container.resources?.[kind]?.cpu && container.resources[kind]?.memory, `${kind} of cpu and memory`);
      }
    });

    it('scales on voxd_queue_depth, a metric voxd exports, through prometheus-adapter or KEDA', () => {
      const metrics = new Metrics();
      new Scheduler({ maxQueue: 1, concurrency: 1, metrics });
      assert.match(metrics.render(), /^# TYPE voxd_queue_depth gauge$/m, 'voxd exports the gauge');
      const hpa = one<IHorizontalPodAutoscaler>(build(path.join(KUBE, 'base')), 'HorizontalPodAutoscaler');
      const [metric, ...others] = hpa.spec?.metrics ?? [];
      assert.ok(metric && others.length === 0);
      assert.equal(metric.type, 'Pods');
      assert.equal(metric.pods?.metric.name, 'voxd_queue_depth');
      assert.equal(metric.pods?.target.type, 'AverageValue');
      assert.ok((hpa.spec?.minReplicas ?? 1) >= 2, 'two replicas at least, so the PDB lets one go');
      const adapter = documents.find((d) => d.file.endsWith('prometheus-adapter-rules.yaml'))?.value as { rules: { custom: { name: { as: string } }[] } };
      assert.deepEqual(
        adapter.rules.custom.map((r) => r.name.as),
        [metric.pods?.metric.name],
        "prometheus-adapter serves the HPA's metric",
      );
      const { dir, cleanup } = withComponents(['keda']);
      try {
        const scaledObject = one<IScaledObject>(build(dir), 'ScaledObject');
        const [trigger] = scaledObject.spec.triggers;
        assert.equal(trigger?.type, 'prometheus');
        assert.match(trigger?.metadata.query ?? '', /^sum\(voxd_queue_depth\b/);
        assert.equal(Number(trigger?.metadata.threshold), Number(metric.pods?.target.averageValue), "KEDA's threshold is the HPA's target");
        assert.equal(scaledObject.spec.minReplicaCount, hpa.spec?.minReplicas);
        assert.equal(scaledObject.spec.maxReplicaCount, hpa.spec?.maxReplicas);
      } finally {
        cleanup();
      }
    });

    it('the ingress-nginx Ingress allows WebSockets, long streams and uploads, unbuffered', () => {
      const ingress = one<IIngress>(build(path.join(KUBE, 'overlays', 'example')), 'Ingress');
      const annotations = ingress.metadata?.annotations ?? {};
      const get = (name: string): string => annotations[`nginx.ingress.kubernetes.io/${name}`] ?? '';
      assert.ok(Number(get('proxy-read-timeout')) > DEFAULTS.realtimeIdleTimeout, "read timeout beyond a live session's idle timeout");
      assert.ok(Number(get('proxy-send-timeout')) >= Number(get('proxy-read-timeout')));
      assert.match(get('proxy-body-size'), /^\d+m$/);
      assert.ok(parseInt(get('proxy-body-size')) >= DEFAULTS.maxUploadMb, 'body size fits --max-upload-mb');
      assert.equal(get('proxy-buffering'), 'off');
      assert.equal(get('proxy-request-buffering'), 'off');
      assert.doesNotMatch(get('proxy-next-upstream'), /non_idempotent/);
    });
  });

  describe('nginx (deploy/nginx/voxd.conf)', () => {
    const directives = nginxDirectives(fs.readFileSync(NGINX_CONF, 'utf8'));

    it('passes nginx -t', { skip: NO_NGINX }, () => {
      const prefix = fs.mkdtempSync(path.join(os.tmpdir(), 'voxd-nginx-t-'));
      try {
        const run = spawnSync(NGINX as string, ['-t', '-p', prefix, '-c', NGINX_CONF, '-e', path.join(prefix, 'error.log')], { encoding: 'utf8' });
        assert.equal(run.status, 0, run.stderr);
        assert.match(run.stderr, /test is successful/);
      } finally {
        fs.rmSync(prefix, { recursive: true, force: true });
      }
    });

    it("balances by least connections, passes WebSocket upgrades, buffers nothing, allows voxd's uploads and long answers", () => {
      assert.deepEqual(directive(directives, 'least_conn'), ['']);
      assert.deepEqual(
        directive(directives, 'server')
          .filter(Boolean) // not the server block
          .map((s) => s.split(' ')[0]),
        ['127.0.0.1:8001', '127.0.0.1:8002', '127.0.0.1:8003'],
      );
      assert.deepEqual(directive(directives, 'listen'), ['8000']);
      assert.deepEqual(directive(directives, 'map')[0], '$http_upgrade $connection_upgrade');
      assert.deepEqual(directive(directives, 'proxy_set_header').slice(0, 2), ['Upgrade $http_upgrade', 'Connection $connection_upgrade']);
      assert.deepEqual(directive(directives, 'proxy_http_version'), ['1.1']);
      assert.deepEqual(directive(directives, 'proxy_buffering'), ['off']);
      assert.deepEqual(directive(directives, 'proxy_request_buffering'), ['off']);
      const [bodySize = ''] = directive(directives, 'client_max_body_size');
      assert.match(bodySize, /^\d+m$/);
      assert.ok(parseInt(bodySize) >= DEFAULTS.maxUploadMb, `client_max_body_size ${bodySize} fits --max-upload-mb ${DEFAULTS.maxUploadMb}`);
      for (const timeout of ['proxy_read_timeout', 'proxy_send_timeout']) {
        assert.ok(seconds(directive(directives, timeout)[0] ?? '') > DEFAULTS.realtimeIdleTimeout, `${timeout} beyond a live session's idle timeout`);
      }
      // a new connection per request: a draining instance refuses it, and nginx tries another (a kept-alive one would
      // carry the request to the draining instance, which answers 503 shutting_down)
      assert.deepEqual(directive(directives, 'keepalive'), []);
      // retries only where the request never reached an instance (see the comment in the conf, and the next test)
      assert.deepEqual(directive(directives, 'proxy_next_upstream'), ['error timeout']);
    });

    describe('in front of stand-in instances', { skip: NO_NGINX }, () => {
      const hits: { instance: string; method: string; url: string }[] = [];
      const received: string[] = [];
      const upstreams: http.Server[] = [];
      let releaseStream = (): void => {};
      let nginx: RunningNginx | null = null;
      let port = 0;

      before(async () => {
        // two instances, and a third port where nothing listens (an instance restarting)
        for (const instance of ['a', 'b']) {
          const server = http.createServer((req, res) => {
            hits.push({ instance, method: req.method ?? '', url: req.url ?? '' });
            if (req.url === '/crash') {
              req.socket.destroy(); // an instance that dies with the request
            } else if (req.url === '/busy') {
              res.writeHead(503, { 'retry-after': '7', 'content-type': 'application/json' }).end('{"error":{"code":"queue_full"}}');
            } else if (req.url === '/stream') {
              res.writeHead(200, { 'content-type': 'application/x-ndjson' });
              res.write('first\n');
              releaseStream = () => res.end('last\n');
            } else if (req.url === '/upload') {
              req.on('data', (chunk: Buffer) => received.push(chunk.toString()));
              req.on('end', () => res.end(`${instance}:${received.join('')}`));
            } else {
              req.resume();
              req.on('end', () => res.end(instance));
            }
          });
          const sockets = new WebSocketServer({ server });
          sockets.on('connection', (socket) => socket.on('message', (data) => socket.send(`${instance}:${String(data)}`)));
          await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
          upstreams.push(server);
        }
        const ports = [...upstreams.map((s) => (s.address() as AddressInfo).port), await freePort()];
        nginx = await startNginx(ports);
        port = nginx.port;
      });

      after(async () => {
        await nginx?.stop();
        for (const server of upstreams) {
          server.closeAllConnections();
          await new Promise((resolve) => server.close(resolve));
        }
      });

      it('sends a POST that found no instance listening to another one', async () => {
        hits.length = 0;
        const replies: Reply[] = [];
        for (let i = 0; i < 6; i++) replies.push(await request(port, 'POST', '/v1/audio/speech', '{"input":"hello"}'));
        assert.deepEqual(
          replies.map((r) => r.status),
          Array(6).fill(200),
        );
        assert.equal(hits.length, 6, 'each POST reached one instance once');
        assert.match(nginx?.errorLog() ?? '', /Connection refused/, 'some went to the port where nothing listens first');
      });

      it('never sends a request that reached an instance to another: a 503 goes back to the client with its Retry-After', async () => {
        for (const method of ['POST', 'GET']) {
          hits.length = 0;
          const reply = await request(port, method, '/busy', method === 'POST' ? 'x' : undefined);
          assert.equal(reply.status, 503);
          assert.equal(reply.headers['retry-after'], '7');
          assert.equal(hits.length, 1, `${method}: one instance saw it`);
        }
        // and a 503 does not take the instance out: the next requests still reach both
        hits.length = 0;
        for (let i = 0; i < 4; i++) await request(port, 'GET', '/v1/models');
        assert.deepEqual([...new Set(hits.map((h) => h.instance))].sort(), ['a', 'b']);
      });

      it("answers in voxd's error envelope when the instance running a request goes away", async () => {
        hits.length = 0;
        const reply = await request(port, 'POST', '/crash', '{"input":"hello"}');
        assert.equal(reply.status, 502);
        assert.match(String(reply.headers['content-type']), /^application\/json/);
        const { error } = JSON.parse(reply.body) as { error: { type: string; code: string; message: string } };
        assert.equal(error.type, 'server_error');
        assert.equal(error.code, 'upstream_unavailable');
        assert.equal(hits.length, 1, 'a POST that reached an instance is not sent to another');
      });

      it('streams answers as they are written, and uploads as they arrive', async () => {
        // the answer: its first line arrives while the instance holds the rest back
        const first = await new Promise<{ text: string; rest: Promise<string> }>((resolve, reject) => {
          http
            .get({ host: '127.0.0.1', port, path: '/stream', agent: false }, (res) => {
              res.setEncoding('utf8');
              let text = '';
              const rest = new Promise<string>((done) => res.on('end', () => done(text)));
              res.once('data', (chunk: string) => {
                text += chunk;
                res.on('data', (more: string) => (text += more));
                resolve({ text, rest });
              });
            })
            .on('error', reject);
        });
        assert.equal(first.text, 'first\n');
        releaseStream();
        assert.equal(await first.rest, 'first\nlast\n');

        // the upload: the instance has its first part before the client sends the rest
        received.length = 0;
        const reply = new Promise<Reply>((resolve, reject) => {
          const req = http.request(
            { host: '127.0.0.1', port, method: 'POST', path: '/upload', agent: false, headers: { 'transfer-encoding': 'chunked' } },
            (res) => {
              let text = '';
              res.setEncoding('utf8');
              res.on('data', (chunk: string) => (text += chunk));
              res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
            },
          );
          req.on('error', reject);
          req.write('part one;');
          const waitForFirstPart = async (): Promise<void> => {
            for (let i = 0; received.join('') !== 'part one;'; i++) {
              assert.ok(i < 100, 'the first part reached the instance before the upload ended');
              await sleep(20);
            }
            req.end('part two');
          };
          waitForFirstPart().catch(reject);
        });
        assert.match((await reply).body, /^[ab]:part one;part two$/);
      });

      it('passes WebSocket upgrades, both ways', async () => {
        const socket = new WebSocket(`ws://127.0.0.1:${port}/v1/realtime`);
        const answer = await new Promise<string>((resolve, reject) => {
          socket.on('open', () => socket.send('hello'));
          socket.on('message', (data) => resolve(String(data)));
          socket.on('error', reject);
        });
        assert.match(answer, /^[ab]:hello$/);
        const closed = new Promise<number>((resolve) => socket.on('close', (code) => resolve(code)));
        socket.close(1000);
        assert.equal(await closed, 1000);
      });
    });
  });

  describe('container images', () => {
    it('Dockerfile: Node 22 on Debian 12, npm ci and a prune, then run-time packages only, uid 10001, port 8000, /healthz, SIGTERM', async () => {
      await checkImage('Dockerfile', { buildBase: /^node:22-bookworm-slim$/, runtimeBase: /^node:22-bookworm-slim$/ });
    });

    it('Dockerfile.cuda: VOXD_CUDA=1 on the CUDA devel image, run on the matching CUDA runtime image', async () => {
      await checkImage('Dockerfile.cuda', { buildBase: /^nvidia\/cuda:[\d.]+-devel-ubuntu[\d.]+$/, runtimeBase: /^nvidia\/cuda:[\d.]+-runtime-ubuntu[\d.]+$/ });
      const stages = parseDockerfile(path.join(ROOT, 'Dockerfile.cuda'));
      const build = stages.find((s) => s.name === 'build');
      const runtime = stages.at(-1);
      assert.equal(build?.base.replace('-devel-', '-'), runtime?.base.replace('-runtime-', '-'), 'the same CUDA version and OS');
      assert.match(instructions(build as Stage, 'RUN').join(' '), /VOXD_CUDA=1 [^&]*\bnpm ci\b/);
      for (const stage of [build, runtime])
        assert.ok(
          instructions(stage as Stage, 'COPY').some((c) => /^--from=node \/usr\/local\/bin\/node /.test(c)),
          'Node from the node image',
        );
    });

    it('.dockerignore keeps build outputs, dependencies and git out of the build context', () => {
      const ignored = fs
        .readFileSync(path.join(ROOT, '.dockerignore'), 'utf8')
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l && !l.startsWith('#'));
      for (const entry of ['node_modules', 'build', 'third_party', 'dist', 'prebuilds', 'logs', '.git']) assert.ok(ignored.includes(entry), entry);
    });
  });
});

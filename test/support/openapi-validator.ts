import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import { parse } from 'yaml';

type Json = Record<string, unknown>;

export interface HeaderObject {
  description?: string;
  required?: boolean;
  schema: Json;
}

export interface MediaTypeObject {
  schema: Json;
  examples?: Record<string, { summary?: string; value: unknown }>;
  example?: unknown;
}

export interface ResponseObject {
  description: string;
  /** `api-gateway` on a response only API Gateway gives, never the function (an extension of this document). */
  'x-answered-by'?: string;
  headers?: Record<string, HeaderObject | { $ref: string }>;
  content?: Record<string, MediaTypeObject>;
}

export interface RequestBodyObject {
  required?: boolean;
  content: Record<string, MediaTypeObject>;
}

export interface OperationObject {
  operationId?: string;
  tags?: string[];
  requestBody?: RequestBodyObject | { $ref: string };
  responses: Record<string, ResponseObject | { $ref: string }>;
}

export interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string; description?: string };
  servers?: { url: string; variables?: Record<string, { default: string; enum?: string[] }> }[];
  tags?: { name: string }[];
  paths: Record<string, Record<string, unknown>>;
  components: {
    schemas: Record<string, Json>;
    responses: Record<string, ResponseObject>;
    requestBodies: Record<string, RequestBodyObject>;
    headers: Record<string, HeaderObject>;
  };
}

/** What a handler answered, as API Gateway would send it. */
export interface ActualResponse {
  statusCode?: number;
  headers?: Record<string, string | number | boolean>;
  body?: string;
}

/** One way an instance fails a schema: ajv's failing keyword and where, never its message text. */
export interface SchemaFailure {
  keyword: string;
  instancePath: string;
}

/** One way a response departs from its documented response. */
export interface ResponseProblem {
  /** `status`, `content-type`, `body` or `header <name>`. */
  where: string;
  /** The schema keyword that failed, or `undocumented`, `missing` or `not-json`. */
  keyword: string;
  /** For a schema failure: where in the body or header value. */
  instancePath?: string;
}

export const OPENAPI_PATH = join(__dirname, '..', '..', 'openapi.yaml');
const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const SCHEMA_REF = '#/components/schemas/';

/** Parse openapi.yaml (or another file). */
export function loadOpenApi(file = OPENAPI_PATH): OpenApiDocument {
  return parse(readFileSync(file, 'utf8')) as OpenApiDocument;
}

/** The value a local JSON pointer (`#/a/b`) names, or `undefined` when it names nothing. */
export function pointer(document: unknown, ref: string): unknown {
  if (!ref.startsWith('#')) return undefined;
  const tokens = ref
    .slice(1)
    .split('/')
    .slice(1)
    .map((token) => decodeURIComponent(token).replaceAll('~1', '/').replaceAll('~0', '~'));
  let current: unknown = document;
  for (const token of tokens) {
    if (typeof current !== 'object' || current === null || !Object.hasOwn(current, token)) return undefined;
    current = (current as Json)[token];
  }
  return current;
}

/** Follow a chain of Reference Objects to the object they name; throws when one does not resolve. */
export function deref<T>(document: OpenApiDocument, value: T | { $ref: string }): T {
  let current: unknown = value;
  for (let hops = 0; isReference(current); hops++) {
    if (hops > 10) throw new Error(`$ref cycle at ${current.$ref}`);
    const next = pointer(document, current.$ref);
    if (next === undefined) throw new Error(`$ref ${current.$ref} does not resolve`);
    current = next;
  }
  return current as T;
}

function isReference(value: unknown): value is { $ref: string } {
  return typeof value === 'object' && value !== null && typeof (value as Json).$ref === 'string';
}

/**
 * Validates instances against the document's schemas with ajv in JSON Schema 2020-12 (the dialect of
 * OpenAPI 3.1), strict so an unknown keyword or a bad pattern fails instead of being ignored.
 */
export class OpenApiValidator {
  private readonly ajv = new Ajv2020({ strict: true, allErrors: true });
  private readonly compiled = new WeakMap<object, ValidateFunction>();
  private readonly definitions: Record<string, Json>;

  constructor(readonly document: OpenApiDocument) {
    this.definitions = rewriteSchemaRefs(document.components.schemas) as Record<string, Json>;
  }

  /** The operation for a path and method; throws when the document has none. */
  operation(path: string, method: string): OperationObject {
    const operation = this.document.paths[path]?.[method];
    if (typeof operation !== 'object' || operation === null) throw new Error(`openapi.yaml documents no ${method.toUpperCase()} ${path}`);
    return operation as OperationObject;
  }

  /** The documented response of an operation for a status (exact code, then `4XX`-style, then default). */
  response(path: string, method: string, status: number): ResponseObject | undefined {
    const responses = this.operation(path, method).responses;
    const documented = responses[String(status)] ?? responses[`${String(status)[0]}XX`] ?? responses.default;
    return documented === undefined ? undefined : deref(this.document, documented);
  }

  requestBody(path: string, method: string): RequestBodyObject {
    const body = this.operation(path, method).requestBody;
    if (body === undefined) throw new Error(`openapi.yaml documents no request body for ${method.toUpperCase()} ${path}`);
    return deref(this.document, body);
  }

  /** ajv's error text for `instance` against `schema`, or `undefined` when it is valid. */
  errorsFor(schema: Json, instance: unknown): string | undefined {
    const validate = this.compile(schema);
    return validate(instance) ? undefined : this.ajv.errorsText(validate.errors, { separator: '; ' });
  }

  /** Each way `instance` fails `schema` (empty when it is valid). */
  failures(schema: Json, instance: unknown): SchemaFailure[] {
    const validate = this.compile(schema);
    if (validate(instance)) return [];
    return (validate.errors ?? []).map(({ keyword, instancePath }) => ({ keyword, instancePath }));
  }

  compile(schema: Json): ValidateFunction {
    let validate = this.compiled.get(schema);
    if (!validate) {
      validate = this.ajv.compile({ ...(rewriteSchemaRefs(schema) as Json), $defs: this.definitions });
      this.compiled.set(schema, validate);
    }
    return validate;
  }

  /**
   * Everything in which an actual response departs from its documented response: its status is not
   * documented, its content type is not a documented media type, its body fails that media type's
   * schema, a header is not documented or fails its schema, a required header is missing. Empty
   * when it matches.
   */
  responseProblems(documented: ResponseObject | undefined, actual: ActualResponse): ResponseProblem[] {
    if (documented === undefined) return [{ where: 'status', keyword: 'undocumented' }];
    const problems: ResponseProblem[] = [];
    const headers = Object.fromEntries(Object.entries(actual.headers ?? {}).map(([name, value]) => [name.toLowerCase(), String(value)]));
    const documentedHeaders = Object.fromEntries(
      Object.entries(documented.headers ?? {}).map(([name, header]) => [name.toLowerCase(), deref<HeaderObject>(this.document, header)]),
    );

    const mediaType = headers['content-type']?.split(';')[0]?.trim().toLowerCase();
    const media = mediaType === undefined ? undefined : documented.content?.[mediaType];
    if (!media) {
      problems.push({ where: 'content-type', keyword: 'undocumented' });
    } else {
      let body: unknown;
      try {
        body = JSON.parse(actual.body ?? '');
      } catch {
        problems.push({ where: 'body', keyword: 'not-json' });
      }
      if (body !== undefined) problems.push(...this.failures(media.schema, body).map((failure) => ({ where: 'body', ...failure })));
    }

    for (const [name, value] of Object.entries(headers)) {
      // OpenAPI documents the content type through `content`, never as a header (OAS 3.1 4.8.17.1).
      if (name === 'content-type') continue;
      const header = documentedHeaders[name];
      if (!header) {
        problems.push({ where: `header ${name}`, keyword: 'undocumented' });
        continue;
      }
      problems.push(...this.failures(header.schema, value).map((failure) => ({ where: `header ${name}`, ...failure })));
    }
    for (const [name, header] of Object.entries(documentedHeaders)) {
      if (header.required && headers[name] === undefined) problems.push({ where: `header ${name}`, keyword: 'missing' });
    }
    return problems;
  }
}

// The document's schemas refer to each other as `#/components/schemas/X`; compiled on their own,
// they find them under `$defs` instead.
function rewriteSchemaRefs(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(rewriteSchemaRefs);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, inner]) => [
      key,
      key === '$ref' && typeof inner === 'string' && inner.startsWith(SCHEMA_REF)
        ? `#/$defs/${inner.slice(SCHEMA_REF.length)}`
        : rewriteSchemaRefs(inner),
    ]),
  );
}

/**
 * Structural checks of OpenAPI 3.1 that need no extra package: the required fields, status codes
 * and descriptions of responses, unique operationIds, declared tags, server variables, that every
 * `$ref` resolves, that every schema compiles under strict 2020-12, and that every example is valid
 * against its schema. Returns one line per problem.
 */
export function structuralProblems(document: OpenApiDocument): string[] {
  const problems: string[] = [];
  const validator = new OpenApiValidator(document);
  const tryCheck = (where: string, check: () => void): void => {
    try {
      check();
    } catch (error) {
      problems.push(`${where}: ${(error as Error).message}`);
    }
  };

  if (typeof document.openapi !== 'string' || !/^3\.1\.\d+$/.test(document.openapi))
    problems.push('openapi must be a 3.1.x version string');
  if (typeof document.info?.title !== 'string') problems.push('info.title is required');
  if (typeof document.info?.version !== 'string') problems.push('info.version is required');
  if (document.paths === undefined && document.components === undefined) problems.push('paths, components or webhooks is required');

  for (const ref of collectRefs(document)) {
    if (pointer(document, ref) === undefined) problems.push(`$ref ${ref} does not resolve`);
  }

  for (const [index, server] of (document.servers ?? []).entries()) {
    if (typeof server.url !== 'string') problems.push(`servers[${index}].url is required`);
    for (const [name, variable] of Object.entries(server.variables ?? {})) {
      if (typeof variable.default !== 'string') problems.push(`servers[${index}].variables.${name}.default is required`);
      if (variable.enum && !variable.enum.includes(variable.default))
        problems.push(`servers[${index}].variables.${name}.default is not in its enum`);
      if (!server.url.includes(`{${name}}`)) problems.push(`servers[${index}].variables.${name} is not used in the url`);
    }
  }

  const declaredTags = new Set((document.tags ?? []).map((tag) => tag.name));
  const operationIds = new Set<string>();
  for (const [path, item] of Object.entries(document.paths ?? {})) {
    if (!path.startsWith('/')) problems.push(`path ${path} must start with /`);
    for (const method of Object.keys(item)) {
      if (!HTTP_METHODS.includes(method)) continue;
      const where = `${method.toUpperCase()} ${path}`;
      const operation = item[method] as OperationObject;
      if (operation.operationId !== undefined) {
        if (operationIds.has(operation.operationId)) problems.push(`${where}: operationId ${operation.operationId} is not unique`);
        operationIds.add(operation.operationId);
      }
      for (const tag of operation.tags ?? []) if (!declaredTags.has(tag)) problems.push(`${where}: tag ${tag} is not declared`);
      if (Object.keys(operation.responses ?? {}).length === 0) problems.push(`${where}: responses must not be empty`);
      for (const [status, response] of Object.entries(operation.responses ?? {})) {
        if (!/^([1-5](\d\d|XX)|default)$/.test(status)) problems.push(`${where}: ${status} is not a status code`);
        tryCheck(`${where} ${status}`, () => {
          if (typeof deref(document, response).description !== 'string') throw new Error('description is required');
        });
      }
      const requestBody = operation.requestBody;
      if (requestBody !== undefined) {
        tryCheck(`${where} requestBody`, () => {
          if (Object.keys(deref(document, requestBody).content ?? {}).length === 0) throw new Error('content must not be empty');
        });
      }
    }
  }

  for (const [name, schema] of Object.entries(document.components?.schemas ?? {})) {
    if (!/^[a-zA-Z0-9.\-_]+$/.test(name)) problems.push(`components.schemas.${name}: invalid name`);
    tryCheck(`components.schemas.${name}`, () => validator.compile(schema));
  }
  for (const [name, header] of Object.entries(document.components?.headers ?? {})) {
    tryCheck(`components.headers.${name}`, () => validator.compile(header.schema));
  }
  for (const [name, response] of Object.entries(document.components?.responses ?? {})) {
    if (typeof response.description !== 'string') problems.push(`components.responses.${name}: description is required`);
    problems.push(...exampleProblems(validator, `components.responses.${name}`, response.content));
  }
  for (const [name, body] of Object.entries(document.components?.requestBodies ?? {})) {
    problems.push(...exampleProblems(validator, `components.requestBodies.${name}`, body.content));
  }
  return problems;
}

function exampleProblems(validator: OpenApiValidator, where: string, content: Record<string, MediaTypeObject> = {}): string[] {
  const problems: string[] = [];
  for (const [type, media] of Object.entries(content)) {
    const examples = Object.entries(media.examples ?? {}).map(([key, example]) => [key, example.value] as const);
    if (media.example !== undefined) examples.push(['example', media.example]);
    for (const [key, value] of examples) {
      let errors: string | undefined;
      try {
        errors = validator.errorsFor(media.schema, value);
      } catch (error) {
        errors = (error as Error).message;
      }
      if (errors) problems.push(`${where} ${type} example ${key}: ${errors}`);
    }
  }
  return problems;
}

function collectRefs(value: unknown, refs: string[] = []): string[] {
  if (Array.isArray(value)) {
    for (const item of value) collectRefs(item, refs);
  } else if (typeof value === 'object' && value !== null) {
    for (const [key, inner] of Object.entries(value)) {
      if (key === '$ref' && typeof inner === 'string') refs.push(inner);
      else collectRefs(inner, refs);
    }
  }
  return refs;
}

import { Stack, Token, Validations } from 'aws-cdk-lib';
import {
  AccessLogFormat,
  AuthorizationType,
  EndpointType as GatewayEndpointType,
  LambdaIntegration,
  LogGroupLogDestination,
  RestApi,
} from 'aws-cdk-lib/aws-apigateway';
import { CfnApiMapping, type DomainName } from 'aws-cdk-lib/aws-apigatewayv2';
import { InterfaceVpcEndpoint } from 'aws-cdk-lib/aws-ec2';
import { AccountPrincipal, AccountRootPrincipal, Effect, PolicyDocument, PolicyStatement, StarPrincipal } from 'aws-cdk-lib/aws-iam';
import { LogGroup } from 'aws-cdk-lib/aws-logs';
import { CfnWebACLAssociation } from 'aws-cdk-lib/aws-wafv2';
import { Construct } from 'constructs';
import { JWKS_PATH, TOKEN_PATHS } from '../lambda/request/routes';
import { OPEN_TOKEN_ROUTES, PUBLIC_JWKS_ROUTE, type TokenApiProps } from './http-token-api';
import { arnPlace } from './regions';
import type { SettingName, SettingProblem } from './setting-problems';
import { ACCESS_LOG_FIELDS, type ApiKind, type ApiMetrics, CALLER_LOG_FIELDS, type TokenApi } from './token-api';

/** Where a REST API is reached: from the internet, or only through execute-api interface VPC endpoints. */
export type EndpointType = 'regional' | 'private';
export const ENDPOINT_TYPES: readonly EndpointType[] = ['regional', 'private'];

export type RestEndpoint = { readonly type: 'regional' } | { readonly type: 'private'; readonly vpcEndpointIds: readonly string[] };

/** The principals of other accounts the resource policy admits to the token routes (the account's own keep their IAM policies). */
export interface AdmittedCallers {
  readonly accounts: readonly string[];
  /** An AWS Organization: every principal of its accounts. */
  readonly orgId?: string;
}

export interface RestTokenApiProps extends TokenApiProps {
  readonly endpoint: RestEndpoint;
  readonly admitted: AdmittedCallers;
  /** An AWS WAF web ACL (regional, in the stack's region) in front of the stage. */
  readonly webAclArn?: string;
  /** X-Ray traces of the stage, beside the function's. */
  readonly tracing: boolean;
}

/** The REST API's one stage; its name is the first segment of every execute-api URL (a custom domain maps it away). */
export const REST_STAGE_NAME = 'api';

/**
 * The function behind an API Gateway REST API (Lambda proxy integration, payload format 1.0): the
 * same routes, on a regional or private endpoint, with a resource policy that admits other accounts
 * or an AWS Organization (and, when private, only through the given VPC endpoints), optionally
 * behind AWS WAF. Any other path or method is API Gateway's own `403 Missing Authentication Token`.
 */
export class RestTokenApi extends Construct implements TokenApi {
  readonly kind = 'rest';
  readonly url: string;
  readonly metrics: ApiMetrics;
  readonly accessLogs: LogGroup;
  readonly invokeArns: readonly string[];
  readonly api: RestApi;

  constructor(scope: Construct, id: string, props: RestTokenApiProps) {
    super(scope, id);
    this.accessLogs = new LogGroup(this, 'AccessLogs', { retention: props.logRetention });
    const { endpoint } = props;
    this.api = new RestApi(this, 'Api', {
      restApiName: Stack.of(this).stackName,
      description: 'OAuth 2.0 client-credentials token exchange',
      endpointConfiguration:
        endpoint.type === 'private'
          ? {
              types: [GatewayEndpointType.PRIVATE],
              vpcEndpoints: endpoint.vpcEndpointIds.map((vpcEndpointId) =>
                InterfaceVpcEndpoint.fromInterfaceVpcEndpointAttributes(this, vpcEndpointId, { vpcEndpointId, port: 443 }),
              ),
            }
          : { types: [GatewayEndpointType.REGIONAL] },
      policy: resourcePolicy(props),
      disableExecuteApiEndpoint: props.disableExecuteApiEndpoint,
      // The account's API Gateway CloudWatch role is account-wide state, not this stack's (docs/DEPLOY.md).
      cloudWatchRole: false,
      deployOptions: {
        stageName: REST_STAGE_NAME,
        throttlingRateLimit: props.throttle.rateLimit,
        throttlingBurstLimit: props.throttle.burstLimit,
        tracingEnabled: props.tracing,
        accessLogDestination: new LogGroupLogDestination(this.accessLogs),
        accessLogFormat: AccessLogFormat.custom(JSON.stringify(accessLogFields(props))),
      },
    });

    // Proxy integration: the function gets the request as a payload 1.0 event. No test-invoke
    // permission: the console's test button is no caller.
    const integration = new LambdaIntegration(props.handler, { proxy: true, allowTestInvoke: false });
    const authorizationType = props.callerAuthorization === 'iam' ? AuthorizationType.IAM : AuthorizationType.NONE;
    for (const path of TOKEN_PATHS) {
      const method = this.api.root.resourceForPath(path).addMethod('POST', integration, { authorizationType });
      if (authorizationType === AuthorizationType.NONE) acknowledgeOpen(method, OPEN_TOKEN_ROUTES);
      else Validations.of(method).acknowledge({ id: 'AwsSolutions-COG4', reason: IAM_NOT_COGNITO });
    }
    if (props.servesJwks) {
      acknowledgeOpen(this.api.root.resourceForPath(JWKS_PATH).addMethod('GET', integration), PUBLIC_JWKS_ROUTE);
    }
    if (props.webAclArn !== undefined) {
      new CfnWebACLAssociation(this, 'WebAcl', { resourceArn: this.api.deploymentStage.stageArn, webAclArn: props.webAclArn });
    } else {
      Validations.of(this.api).acknowledge({
        id: 'AwsSolutions-APIG3',
        reason: 'No webAclArn given: the deployment chose no AWS WAF web ACL. Throttling and, with iam, SigV4 still come first.',
      });
    }
    Validations.of(this.api).acknowledge({
      id: 'AwsSolutions-APIG2',
      reason:
        'The function validates every request against the contract and answers its own error shape; an API Gateway model would answer bad bodies in another shape, and form bodies it cannot model.',
    });
    Validations.of(this.api).acknowledge({
      id: 'AwsSolutions-APIG6',
      reason:
        'The access log records every request with the integration error and the error message; execution logs would add a log group API Gateway creates outside the stack, kept forever.',
    });

    // The stack outputs the URL itself, under the same names as with the HTTP API.
    this.api.node.tryRemoveChild('Endpoint');
    this.metrics = this.api.deploymentStage;
    this.url = this.api.url;
    this.invokeArns = TOKEN_PATHS.map((path) => this.api.arnForExecuteApi('POST', path, REST_STAGE_NAME));
  }

  mapDomain(scope: Construct, id: string, domain: DomainName): void {
    const mapping = new CfnApiMapping(scope, id, { apiId: this.api.restApiId, domainName: domain.name, stage: REST_STAGE_NAME });
    mapping.node.addDependency(this.api.deploymentStage);
  }
}

const IAM_NOT_COGNITO =
  'callerAuthorization is iam: callers are AWS principals verified by SigV4, which a Cognito user pool would not know.';

function acknowledgeOpen(method: Construct, reason: string): void {
  Validations.of(method).acknowledge({ id: 'AwsSolutions-APIG4', reason });
  Validations.of(method).acknowledge({ id: 'AwsSolutions-COG4', reason });
}

/** The access log as the HTTP API writes it, in the REST stage's variables, plus its endpoint and WAF where there are. */
function accessLogFields(props: RestTokenApiProps): Record<string, string> {
  return {
    ...ACCESS_LOG_FIELDS,
    routeKey: '$context.httpMethod $context.resourcePath',
    ...(props.callerAuthorization === 'iam' ? CALLER_LOG_FIELDS : {}),
    ...(props.endpoint.type === 'private' ? { vpceId: '$context.identity.vpceId' } : {}),
    ...(props.webAclArn === undefined ? {} : { wafStatus: '$context.waf.status' }),
  };
}

/**
 * Who may invoke what, before IAM authorization is even looked at. Other accounts' principals need
 * both this and their own IAM policy; the account's own need only their IAM policy, as on the HTTP
 * API. A private API is refused from anywhere but its VPC endpoints, whoever calls. No policy at all
 * when there is nothing to say (regional, no other account).
 */
function resourcePolicy({ admitted, endpoint, callerAuthorization, servesJwks }: RestTokenApiProps): PolicyDocument | undefined {
  const tokenRoutes = TOKEN_PATHS.map((path) => `execute-api:/${REST_STAGE_NAME}/POST${path}`);
  const statements: PolicyStatement[] = [];
  if (admitted.accounts.length > 0) {
    statements.push(
      new PolicyStatement({
        sid: 'AdmitCallerAccounts',
        principals: admitted.accounts.map((account) => new AccountPrincipal(account)),
        actions: ['execute-api:Invoke'],
        resources: tokenRoutes,
      }),
    );
  }
  if (admitted.orgId !== undefined) {
    statements.push(
      new PolicyStatement({
        sid: 'AdmitCallerOrganization',
        principals: [new StarPrincipal()],
        actions: ['execute-api:Invoke'],
        resources: tokenRoutes,
        conditions: { StringEquals: { 'aws:PrincipalOrgID': admitted.orgId } },
      }),
    );
  }
  if (endpoint.type === 'regional' && statements.length === 0) return undefined;
  if (statements.length === 0) {
    // A private API takes nothing its policy does not allow: the account's own principals, or anyone inside.
    statements.push(
      new PolicyStatement({
        sid: callerAuthorization === 'iam' ? 'AdmitOwnAccount' : 'AdmitAnyCallerInside',
        principals: [callerAuthorization === 'iam' ? new AccountRootPrincipal() : new StarPrincipal()],
        actions: ['execute-api:Invoke'],
        resources: tokenRoutes,
      }),
    );
  }
  if (servesJwks) {
    statements.push(
      new PolicyStatement({
        sid: 'PublishJwks',
        principals: [new StarPrincipal()],
        actions: ['execute-api:Invoke'],
        resources: [`execute-api:/${REST_STAGE_NAME}/GET${JWKS_PATH}`],
      }),
    );
  }
  if (endpoint.type === 'private') {
    statements.push(
      new PolicyStatement({
        sid: 'OnlyThroughVpcEndpoints',
        effect: Effect.DENY,
        principals: [new StarPrincipal()],
        actions: ['execute-api:Invoke'],
        resources: ['execute-api:/*'],
        conditions: { StringNotEquals: { 'aws:SourceVpce': [...endpoint.vpcEndpointIds] } },
      }),
    );
  }
  return new PolicyDocument({ statements });
}

/** The settings of the REST API's features, as the stack's props name them. */
export interface RestApiSettings {
  readonly api: ApiKind;
  readonly endpoint?: EndpointType;
  readonly vpcEndpointIds?: readonly string[];
  readonly callerAccounts?: readonly string[];
  readonly callerOrgId?: string;
  readonly webAclArn?: string;
  readonly callerAuthorization: string;
  readonly corsOrigins?: readonly string[];
}

const VPC_ENDPOINT_ID = /^vpce-[0-9a-f]{8}(?:[0-9a-f]{9})?$/;
const ACCOUNT_ID = /^\d{12}$/;
const ORGANIZATION_ID = /^o-[a-z0-9]{10,32}$/;
const WEB_ACL_ARN = /^arn:aws[a-z-]*:wafv2:[a-z0-9-]+:\d{12}:regional\/webacl\/[A-Za-z0-9_-]{1,128}\/[a-f0-9-]{36}$/;

/** Why each REST-only setting means nothing to an HTTP API. */
const REST_ONLY: Readonly<Record<string, string>> = {
  endpoint: 'an HTTP API is always on the internet',
  vpcEndpointIds: 'an HTTP API cannot be private',
  callerAccounts: 'an HTTP API has no resource policy to admit other accounts by',
  callerOrgId: 'an HTTP API has no resource policy to admit an organization by',
  webAclArn: 'AWS WAF protects REST APIs, not HTTP APIs',
};

/**
 * One message per problem, naming the settings: the REST-only settings need `api=rest`, a private
 * endpoint its VPC endpoints, admitted accounts IAM callers, and each id or ARN its form (a web ACL
 * in the stack's partition; its region is checked with the stack's other regional ARNs).
 */
export function restApiSettingProblems(settings: RestApiSettings, partition: string): SettingProblem[] {
  const { api, endpoint, vpcEndpointIds, callerAccounts, callerOrgId, webAclArn } = settings;
  const problems: SettingProblem[] = [];
  if (!(['http', 'rest'] as readonly string[]).includes(api)) problems.push(`api must be one of http, rest, got ${api}`);
  if (api !== 'rest') {
    for (const [prop, value] of Object.entries({ endpoint, vpcEndpointIds, callerAccounts, callerOrgId, webAclArn })) {
      if (value !== undefined) problems.push((name) => `${name(prop)} needs ${name('api')}=rest: ${REST_ONLY[prop]}`);
    }
    return problems;
  }
  if (settings.corsOrigins !== undefined) {
    problems.push(
      (name) =>
        `${name('corsOrigins')} needs ${name('api')}=http: a REST API leaves the CORS headers of its answers to the function, which sets none`,
    );
  }
  if (endpoint !== undefined && !ENDPOINT_TYPES.includes(endpoint)) {
    problems.push((name) => `${name('endpoint')} must be one of ${ENDPOINT_TYPES.join(', ')}, got ${endpoint}`);
  }
  if (endpoint === 'private' && !vpcEndpointIds?.length) {
    problems.push(
      (name) => `${name('endpoint')}=private needs ${name('vpcEndpointIds')}: the execute-api interface VPC endpoints callers come through`,
    );
  }
  if (vpcEndpointIds !== undefined && endpoint !== 'private') {
    problems.push((name) => `${name('vpcEndpointIds')} needs ${name('endpoint')}=private`);
  }
  for (const id of vpcEndpointIds ?? []) {
    if (!VPC_ENDPOINT_ID.test(id)) {
      problems.push((name) => `${name('vpcEndpointIds')} entries must be VPC endpoint ids like vpce-0123456789abcdef0, got "${id}"`);
    }
  }
  problems.push(...admittedCallerProblems(settings));
  if (webAclArn !== undefined) problems.push(...webAclProblems(webAclArn, partition));
  return problems;
}

function admittedCallerProblems({ callerAccounts, callerOrgId, callerAuthorization }: RestApiSettings): SettingProblem[] {
  const problems: SettingProblem[] = [];
  for (const [prop, value] of Object.entries({ callerAccounts, callerOrgId })) {
    if (value !== undefined && callerAuthorization !== 'iam') {
      problems.push(
        (name) =>
          `${name(prop)} needs ${name('callerAuthorization')}=iam: the resource policy admits AWS principals, and without SigV4 no caller is one`,
      );
    }
  }
  if (callerAccounts?.length === 0) problems.push((name) => `${name('callerAccounts')} must list at least one account when set`);
  for (const account of callerAccounts ?? []) {
    if (!ACCOUNT_ID.test(account))
      problems.push((name) => `${name('callerAccounts')} entries must be 12-digit account ids, got "${account}"`);
  }
  if (callerOrgId !== undefined && !ORGANIZATION_ID.test(callerOrgId)) {
    problems.push((name) => `${name('callerOrgId')} must be an AWS Organizations id like o-a1b2c3d4e5, got "${callerOrgId}"`);
  }
  return problems;
}

function webAclProblems(webAclArn: string, partition: string): SettingProblem[] {
  if (!WEB_ACL_ARN.test(webAclArn)) {
    return [
      (name: SettingName) =>
        `${name('webAclArn')} must be a regional AWS WAF web ACL ARN (arn:aws:wafv2:REGION:ACCOUNT:regional/webacl/NAME/ID), got "${webAclArn}"`,
    ];
  }
  const arnPartition = arnPlace(webAclArn)?.partition;
  if (!Token.isUnresolved(partition) && arnPartition !== partition) {
    return [(name: SettingName) => `${name('webAclArn')} is in partition ${arnPartition}, but the stack deploys to ${partition}`];
  }
  return [];
}

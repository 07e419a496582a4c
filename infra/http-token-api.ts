import { Duration, Stack, Validations } from 'aws-cdk-lib';
import { AccessLogFormat } from 'aws-cdk-lib/aws-apigateway';
import {
  ApiMapping,
  CorsHttpMethod,
  type DomainName,
  HttpApi,
  HttpMethod,
  HttpStage,
  LogGroupLogDestination,
  PayloadFormatVersion,
} from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpIamAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import { LogGroup, type RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { JWKS_PATH, TOKEN_PATHS } from '../lambda/request/routes';
import { keepLogicalIdsOfChildren } from './logical-ids';
import { ACCESS_LOG_FIELDS, type ApiMetrics, CALLER_LOG_FIELDS, type TokenApi } from './token-api';

/** Who may call the token routes: anyone who can reach them, or SigV4-signed IAM principals. */
export type CallerAuthorization = 'none' | 'iam';

/** What both APIs are built from. */
export interface TokenApiProps {
  readonly handler: IFunction;
  readonly callerAuthorization: CallerAuthorization;
  readonly throttle: { readonly rateLimit: number; readonly burstLimit: number };
  readonly logRetention: RetentionDays;
  readonly disableExecuteApiEndpoint: boolean;
  /** Serve `GET /.well-known/jwks.json` too, without caller authentication. */
  readonly servesJwks: boolean;
}

export interface HttpTokenApiProps extends TokenApiProps {
  /** Origins a browser may call from; the HTTP API answers CORS preflights itself. */
  readonly corsOrigins?: readonly string[];
}

/**
 * The function behind an API Gateway HTTP API (payload format 2.0): the two token routes (and the
 * JWKS route) on one Lambda integration, a `$default` stage with throttling and JSON access logs.
 * Its resources keep the logical ids they had when the stack made them itself.
 */
export class HttpTokenApi extends Construct implements TokenApi {
  readonly kind = 'http';
  readonly url: string;
  readonly metrics: ApiMetrics;
  readonly accessLogs: LogGroup;
  readonly invokeArns: readonly string[];
  readonly api: HttpApi;
  readonly stage: HttpStage;

  constructor(scope: Construct, id: string, props: HttpTokenApiProps) {
    super(scope, id);
    keepLogicalIdsOfChildren(this);
    this.accessLogs = new LogGroup(this, 'AccessLogs', { retention: props.logRetention });
    this.api = new HttpApi(this, 'Api', {
      apiName: Stack.of(this).stackName,
      description: 'OAuth 2.0 client-credentials token exchange',
      createDefaultStage: false,
      disableExecuteApiEndpoint: props.disableExecuteApiEndpoint,
      corsPreflight: props.corsOrigins && {
        allowOrigins: [...props.corsOrigins],
        allowMethods: [CorsHttpMethod.POST],
        allowHeaders: corsAllowedHeaders(props.callerAuthorization),
        maxAge: Duration.hours(1),
      },
    });
    this.stage = new HttpStage(this, 'DefaultStage', {
      httpApi: this.api,
      stageName: '$default',
      autoDeploy: true,
      throttle: props.throttle,
      accessLogSettings: {
        destination: new LogGroupLogDestination(this.accessLogs),
        format: AccessLogFormat.custom(
          JSON.stringify({
            ...ACCESS_LOG_FIELDS,
            routeKey: '$context.routeKey',
            ...(props.callerAuthorization === 'iam' ? CALLER_LOG_FIELDS : {}),
          }),
        ),
      },
    });

    const integration = new HttpLambdaIntegration('TokenIntegration', props.handler, {
      payloadFormatVersion: PayloadFormatVersion.VERSION_2_0,
    });
    // IAM: API Gateway checks the SigV4 signature and the caller's execute-api:Invoke permission
    // before the function runs; an unsigned or unpermitted request gets its 403 and costs nothing.
    const authorizer = props.callerAuthorization === 'iam' ? new HttpIamAuthorizer() : undefined;
    for (const path of TOKEN_PATHS) this.api.addRoutes({ path, methods: [HttpMethod.POST], integration, authorizer });
    if (props.servesJwks) {
      for (const route of this.api.addRoutes({ path: JWKS_PATH, methods: [HttpMethod.GET], integration })) {
        Validations.of(route).acknowledge({ id: 'AwsSolutions-APIG4', reason: PUBLIC_JWKS_ROUTE });
      }
    }
    if (!authorizer) Validations.of(this.api).acknowledge({ id: 'AwsSolutions-APIG4', reason: OPEN_TOKEN_ROUTES });

    this.metrics = this.api;
    this.url = this.stage.url;
    this.invokeArns = TOKEN_PATHS.map((path) => this.api.arnForExecuteApi('POST', path, this.stage.stageName));
  }

  mapDomain(scope: Construct, id: string, domain: DomainName): void {
    new ApiMapping(scope, id, { api: this.api, domainName: domain, stage: this.stage });
  }
}

/** Why the token routes may take no caller authentication (cdk-nag APIG4, and on REST COG4). */
export const OPEN_TOKEN_ROUTES =
  'callerAuthorization is none: the token routes are the authentication step itself. Callers present OAuth client credentials in the body and the IdP judges them; callerAuthorization=iam puts SigV4 in front.';

/** Why the JWKS route takes no caller authentication. */
export const PUBLIC_JWKS_ROUTE =
  'GET /.well-known/jwks.json serves the public keys of the stored credentials for IdPs to fetch, as a JWKS URL must be; it reads no body and answers nothing secret. The token routes keep IAM authorization.';

/**
 * Request headers a browser may send cross-origin: the body's content type, and with IAM callers the
 * SigV4 headers a signing browser client adds (its signature, date, session token and body hash).
 */
function corsAllowedHeaders(callerAuthorization: CallerAuthorization): string[] {
  const sigV4 = ['authorization', 'x-amz-date', 'x-amz-security-token', 'x-amz-content-sha256'];
  return callerAuthorization === 'iam' ? ['content-type', ...sigV4] : ['content-type'];
}

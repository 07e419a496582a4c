import { CfnOutput, Stack } from 'aws-cdk-lib';
import { DomainName, SecurityPolicy } from 'aws-cdk-lib/aws-apigatewayv2';
import { Certificate } from 'aws-cdk-lib/aws-certificatemanager';
import { ARecord, HostedZone, RecordTarget } from 'aws-cdk-lib/aws-route53';
import { ApiGatewayv2DomainProperties } from 'aws-cdk-lib/aws-route53-targets';
import { Construct } from 'constructs';
import type { SettingProblem } from './setting-problems';
import type { TokenApi } from './token-api';

/** The API's own name, instead of or beside its execute-api address. */
export interface CustomDomainSettings {
  readonly domainName?: string;
  readonly certificateArn?: string;
  readonly hostedZoneId?: string;
  readonly disableExecuteApiEndpoint: boolean;
}

export interface CustomDomainProps {
  /** The API whose stage the name serves, HTTP or REST. */
  readonly api: TokenApi;
  /** `auth.example.com`: the name callers use. */
  readonly domainName: string;
  /** An ACM certificate for the name, in the stack's region. */
  readonly certificateArn: string;
  /** A public Route 53 hosted zone the name belongs to: the stack writes the name's alias record there. */
  readonly hostedZoneId?: string;
}

// A DNS name of two or more labels; a wildcard is the certificate's business, not the API's name.
const DOMAIN_NAME = /^(?=.{1,253}$)(?!-)[a-z0-9-]{1,63}(?<!-)(\.(?!-)[a-z0-9-]{1,63}(?<!-))+$/;
const CERTIFICATE_ARN = /^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate\/[A-Za-z0-9-]+$/;
const HOSTED_ZONE_ID = /^Z[A-Z0-9]{1,31}$/;

/** One message per problem, naming the settings (the certificate's region is checked with the stack's other regional ARNs). */
export function customDomainProblems(settings: CustomDomainSettings): SettingProblem[] {
  const { domainName, certificateArn, hostedZoneId, disableExecuteApiEndpoint } = settings;
  const problems: SettingProblem[] = [];
  if (domainName === undefined) {
    if (certificateArn !== undefined) problems.push((name) => `${name('certificateArn')} needs ${name('domainName')}, the name it is for`);
    if (hostedZoneId !== undefined) problems.push((name) => `${name('hostedZoneId')} needs ${name('domainName')}, the name to write there`);
    if (disableExecuteApiEndpoint) {
      problems.push(
        (name) => `${name('disableExecuteApiEndpoint')}=true needs ${name('domainName')}: without one the API would have no address`,
      );
    }
    return problems;
  }
  if (!DOMAIN_NAME.test(domainName)) {
    problems.push((name) => `${name('domainName')} must be a lower-case DNS name like auth.example.com, got "${domainName}"`);
  }
  if (certificateArn === undefined) {
    problems.push(
      (name) => `${name('domainName')} needs ${name('certificateArn')}: an ACM certificate for the name, in the stack's region`,
    );
  } else if (!CERTIFICATE_ARN.test(certificateArn)) {
    problems.push(
      (name) =>
        `${name('certificateArn')} must be an ACM certificate ARN (arn:aws:acm:REGION:ACCOUNT:certificate/ID), got "${certificateArn}"`,
    );
  }
  if (hostedZoneId !== undefined && !HOSTED_ZONE_ID.test(hostedZoneId)) {
    problems.push((name) => `${name('hostedZoneId')} must be a Route 53 hosted zone id like Z0123456789ABCDEFGHIJ, got "${hostedZoneId}"`);
  }
  return problems;
}

/**
 * The API under a name of yours: a regional API Gateway domain (TLS 1.2 at least) with the
 * certificate, mapped to the stage of either kind of API. With a hosted zone, a latency-routed alias record for the
 * stack's region, so the same name can front a stack in another region beside this one.
 */
export class CustomDomain extends Construct {
  /** `https://NAME/`. */
  readonly url: string;

  constructor(scope: Construct, id: string, props: CustomDomainProps) {
    super(scope, id);
    const domain = new DomainName(this, 'DomainName', {
      domainName: props.domainName,
      certificate: Certificate.fromCertificateArn(this, 'Certificate', props.certificateArn),
      securityPolicy: SecurityPolicy.TLS_1_2,
    });
    props.api.mapDomain(this, 'Mapping', domain);
    if (props.hostedZoneId !== undefined) {
      const region = Stack.of(this).region;
      new ARecord(this, 'Alias', {
        zone: HostedZone.fromHostedZoneId(this, 'Zone', props.hostedZoneId),
        // Fully qualified, so the zone's own name is never needed: synth looks nothing up.
        recordName: `${props.domainName}.`,
        target: RecordTarget.fromAlias(new ApiGatewayv2DomainProperties(domain.regionalDomainName, domain.regionalHostedZoneId)),
        region,
        setIdentifier: region,
      });
    }
    new CfnOutput(this, 'DnsTarget', {
      key: 'DomainTarget',
      value: domain.regionalDomainName,
      description: props.hostedZoneId
        ? `Where the stack's alias record for ${props.domainName} points`
        : `Point ${props.domainName} here: a CNAME, or an alias record in Route 53`,
    });
    this.url = `https://${props.domainName}/`;
  }
}

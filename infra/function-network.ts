import { Annotations, Stack } from 'aws-cdk-lib';
import { CfnSecurityGroup } from 'aws-cdk-lib/aws-ec2';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { CfnFunction, IFunction } from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import { isIP } from 'node:net';
import { isPublicUnicast } from '../lambda/policy/address-ranges';
import type { AllowlistEntry } from '../lambda/policy/token-url-policy';
import type { SettingProblem } from './setting-problems';
import type { FunctionGrant } from './token-function';

/** Where the function runs: Lambda's own network (none set), or subnets of a VPC of yours. */
export interface FunctionNetworkSettings {
  readonly vpcId?: string;
  readonly vpcSubnetIds?: readonly string[];
  /** Existing security groups, instead of the one the stack creates. */
  readonly vpcSecurityGroupIds?: readonly string[];
}

export interface FunctionNetworkProps {
  readonly vpcId: string;
  readonly subnetIds: readonly string[];
  /** Left out, the construct creates a security group whose only rules are `egress`. */
  readonly securityGroupIds?: readonly string[];
  /** Where the function connects out to: TCP ports, each to an address or to any. */
  readonly egress: readonly EgressRule[];
}

/** One way out: a TCP port, to one address (an allowlist entry's IP literal) or to any (`0.0.0.0/0` and `::/0`). */
export interface EgressRule {
  readonly port: number;
  readonly to: 'any' | { readonly address: string };
}

const VPC_ID = /^vpc-[0-9a-f]{8}(?:[0-9a-f]{9})?$/;
const SUBNET_ID = /^subnet-[0-9a-f]{8}(?:[0-9a-f]{9})?$/;
const SECURITY_GROUP_ID = /^sg-[0-9a-f]{8}(?:[0-9a-f]{9})?$/;

/** HTTPS: the default token URL port, and how the function reaches DynamoDB, Secrets Manager and KMS. */
const HTTPS_PORT = 443;

/** One message per problem: the subnets and groups need their VPC, the VPC its subnets, and each id its form. */
export function networkSettingProblems({ vpcId, vpcSubnetIds, vpcSecurityGroupIds }: FunctionNetworkSettings): SettingProblem[] {
  const problems: SettingProblem[] = [];
  if (vpcId === undefined) {
    if (vpcSubnetIds !== undefined) problems.push((name) => `${name('vpcSubnetIds')} needs ${name('vpcId')}, the VPC they belong to`);
    if (vpcSecurityGroupIds !== undefined) {
      problems.push((name) => `${name('vpcSecurityGroupIds')} needs ${name('vpcId')}, the VPC they belong to`);
    }
    return problems;
  }
  if (!VPC_ID.test(vpcId)) problems.push((name) => `${name('vpcId')} must be a VPC id like vpc-0123456789abcdef0, got "${vpcId}"`);
  if (vpcSubnetIds === undefined || vpcSubnetIds.length === 0) {
    problems.push(
      (name) => `${name('vpcId')} needs ${name('vpcSubnetIds')}: the subnets the function runs in, private ones in two or more zones`,
    );
  }
  for (const id of vpcSubnetIds ?? []) {
    if (!SUBNET_ID.test(id))
      problems.push((name) => `${name('vpcSubnetIds')} entries must be subnet ids like subnet-0123456789abcdef0, got "${id}"`);
  }
  if (vpcSecurityGroupIds?.length === 0) problems.push((name) => `${name('vpcSecurityGroupIds')} must list at least one group when set`);
  for (const id of vpcSecurityGroupIds ?? []) {
    if (!SECURITY_GROUP_ID.test(id)) {
      problems.push((name) => `${name('vpcSecurityGroupIds')} entries must be security group ids like sg-0123456789abcdef0, got "${id}"`);
    }
  }
  return problems;
}

/**
 * Where the function's own security group lets it out: each allowlist entry's port, to the entry's
 * address when it names one literally, else anywhere (a name resolves to whatever its DNS says);
 * 443 anywhere when any public https URL is allowed, or when the function calls AWS (the shared
 * cache's table and pepper, stored credentials' secrets and keys), whose endpoints, in the VPC or
 * past a NAT gateway, the stack cannot name.
 */
export function egressRules(allowlist: readonly AllowlistEntry[], callsAws: boolean): EgressRule[] {
  const rules: EgressRule[] = allowlist.map(({ host, port }) => ({ port: Number(port), to: isIP(host) === 0 ? 'any' : { address: host } }));
  if (allowlist.length === 0 || callsAws) rules.push({ port: HTTPS_PORT, to: 'any' });
  const open = new Set(rules.filter((rule) => rule.to === 'any').map((rule) => rule.port));
  const kept = new Map<string, EgressRule>();
  for (const rule of rules) {
    if (rule.to !== 'any' && open.has(rule.port)) continue;
    kept.set(`${rule.port} ${rule.to === 'any' ? '*' : rule.to.address}`, rule);
  }
  return [...kept.values()].sort((a, b) => a.port - b.port);
}

/** An entry naming a private or loopback address, or `localhost`: an address only a network of your own can reach. */
export function namesPrivateAddress(entry: AllowlistEntry): boolean {
  return entry.host === 'localhost' || (isIP(entry.host) !== 0 && !isPublicUnicast(entry.host));
}

/** Outside a VPC the function reaches only the internet: an entry naming a private address can never answer. */
export function warnOfUnreachableEntries(scope: Construct, allowlist: readonly AllowlistEntry[]): void {
  for (const entry of allowlist.filter(namesPrivateAddress)) {
    Annotations.of(scope).addWarningV2(
      'token-exchange:private-token-url-without-vpc',
      `allowedTokenUrls entry "${entry.text}" names an address only a network of your own reaches, and the function is in no VPC: set vpcId and vpcSubnetIds (docs/DEPLOY.md)`,
    );
  }
}

/**
 * The function's place in a VPC of yours: the subnets it runs in, and either your security groups or
 * one whose only rules let it out on the given ports. Traffic to the VPC's DNS resolver is not
 * subject to security groups, so name resolution needs no rule. Everything is by id (an imported
 * VPC's L2 would want its zones and route tables), so synth looks nothing up.
 */
export class FunctionNetwork extends Construct {
  /** Why the role's network-interface grants include some on `*`, for cdk-nag. */
  static readonly DESCRIBE_ON_ANY_RESOURCE =
    'vpcId: ec2:DescribeNetworkInterfaces and ec2:DescribeSubnets work only on Resource "*"; the role may create, delete and address network interfaces only in its VPC (ec2:Vpc).';

  readonly vpcId: string;
  readonly subnetIds: readonly string[];
  readonly securityGroupIds: readonly string[];
  /** The group the construct created, when none was given. */
  readonly securityGroup?: CfnSecurityGroup;

  constructor(scope: Construct, id: string, props: FunctionNetworkProps) {
    super(scope, id);
    this.vpcId = props.vpcId;
    this.subnetIds = props.subnetIds;
    if (props.securityGroupIds) {
      this.securityGroupIds = props.securityGroupIds;
    } else {
      this.securityGroup = egressOnlyGroup(this, props.vpcId, props.egress);
      this.securityGroupIds = [this.securityGroup.attrGroupId];
    }
  }

  /** Put the function in the subnets, behind the groups. */
  attach(fn: IFunction): void {
    (fn.node.defaultChild as CfnFunction).vpcConfig = { subnetIds: [...this.subnetIds], securityGroupIds: [...this.securityGroupIds] };
  }

  /**
   * What Lambda needs of the function's role to give it network interfaces in the VPC: the two
   * Describe actions work only on every resource; the others only within this VPC.
   */
  functionGrant(): FunctionGrant {
    const vpcArn = Stack.of(this).formatArn({ service: 'ec2', resource: 'vpc', resourceName: this.vpcId });
    return {
      duty: 'manages its network interfaces in its VPC',
      inlinePolicies: {
        UseVpcNetworkInterfaces: [
          new PolicyStatement({ actions: ['ec2:DescribeNetworkInterfaces', 'ec2:DescribeSubnets'], resources: ['*'] }),
          new PolicyStatement({
            actions: [
              'ec2:CreateNetworkInterface',
              'ec2:DeleteNetworkInterface',
              'ec2:AssignPrivateIpAddresses',
              'ec2:UnassignPrivateIpAddresses',
            ],
            resources: ['*'],
            conditions: { ArnEquals: { 'ec2:Vpc': vpcArn } },
          }),
        ],
      },
      onAnyResourceBecause: FunctionNetwork.DESCRIBE_ON_ANY_RESOURCE,
    };
  }
}

/** Egress rules replace the group's default allow-all egress; no ingress rule, so nothing gets in. */
function egressOnlyGroup(scope: Construct, vpcId: string, egress: readonly EgressRule[]): CfnSecurityGroup {
  const ports = [...new Set(egress.map((rule) => rule.port))];
  return new CfnSecurityGroup(scope, 'SecurityGroup', {
    vpcId,
    groupDescription: `Token exchange function: out to TCP ${ports.join(', ')} only, nothing in`,
    securityGroupEgress: egress.flatMap(({ port, to }) => {
      const rule = { ipProtocol: 'tcp', fromPort: port, toPort: port };
      if (to !== 'any') {
        const cidr = isIP(to.address) === 6 ? { cidrIpv6: `${to.address}/128` } : { cidrIp: `${to.address}/32` };
        return [{ ...rule, ...cidr, description: `TCP ${port} out to ${to.address}` }];
      }
      return [
        { ...rule, cidrIp: '0.0.0.0/0', description: `TCP ${port} out, IPv4` },
        { ...rule, cidrIpv6: '::/0', description: `TCP ${port} out, IPv6` },
      ];
    }),
  });
}

import { Annotations, Stack } from 'aws-cdk-lib';
import { CfnSecurityGroup } from 'aws-cdk-lib/aws-ec2';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { CfnFunction, IFunction } from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import { isIP } from 'node:net';
import { isPublicUnicast } from '../lambda/policy/address-ranges';
import type { AllowlistEntry } from '../lambda/policy/token-url-policy';
import type { SettingProblem } from './setting-problems';

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
  /** Left out, the construct creates a security group whose only rules are egress to `egressPorts`. */
  readonly securityGroupIds?: readonly string[];
  /** TCP ports the function connects out to, to any address. */
  readonly egressPorts: readonly number[];
}

const VPC_ID = /^vpc-[0-9a-f]{8}(?:[0-9a-f]{9})?$/;
const SUBNET_ID = /^subnet-[0-9a-f]{8}(?:[0-9a-f]{9})?$/;
const SECURITY_GROUP_ID = /^sg-[0-9a-f]{8}(?:[0-9a-f]{9})?$/;

/** HTTPS: the default token URL port, and how the function reaches DynamoDB and Secrets Manager. */
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

/** The ports the function's own security group lets out: HTTPS, and the port of each allowlist entry. */
export function egressPorts(allowlist: readonly AllowlistEntry[]): number[] {
  return [...new Set([HTTPS_PORT, ...allowlist.map((entry) => Number(entry.port))])].sort((a, b) => a - b);
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
      this.securityGroup = egressOnlyGroup(this, props.vpcId, props.egressPorts);
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
  accessStatements(): PolicyStatement[] {
    const vpcArn = Stack.of(this).formatArn({ service: 'ec2', resource: 'vpc', resourceName: this.vpcId });
    return [
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
    ];
  }
}

/** Egress rules replace the group's default allow-all egress; no ingress rule, so nothing gets in. */
function egressOnlyGroup(scope: Construct, vpcId: string, ports: readonly number[]): CfnSecurityGroup {
  return new CfnSecurityGroup(scope, 'SecurityGroup', {
    vpcId,
    groupDescription: `Token exchange function: out to TCP ${ports.join(', ')} only, nothing in`,
    securityGroupEgress: ports.flatMap((port) => [
      { ipProtocol: 'tcp', fromPort: port, toPort: port, cidrIp: '0.0.0.0/0', description: `TCP ${port} out, IPv4` },
      { ipProtocol: 'tcp', fromPort: port, toPort: port, cidrIpv6: '::/0', description: `TCP ${port} out, IPv6` },
    ]),
  });
}

// tikv-client-java at its defaults (gRPC health checks, forwarding enabled) against the simulator
// (docs/wire.md#grpc-health, docs/wire.md#request-forwarding): a two-phase commit of a few rows with its TwoPhaseCommitter, then
// a snapshot scan; prints "ts", then "row hexkey hexvalue" lines.
//
//   Main PD_ADDRESS START_KEY_HEX END_KEY_HEX KEY_HEX...
package tidelake;

import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import org.tikv.common.BytePairWrapper;
import org.tikv.common.ByteWrapper;
import org.tikv.common.TiConfiguration;
import org.tikv.common.TiSession;
import org.tikv.common.util.ConcreteBackOffer;
import org.tikv.kvproto.Kvrpcpb;
import org.tikv.shade.com.google.protobuf.ByteString;
import org.tikv.txn.KVClient;
import org.tikv.txn.TwoPhaseCommitter;

public class Main {
  public static void main(String[] args) throws Exception {
    HexFormat hex = HexFormat.of();
    TiSession session = TiSession.create(TiConfiguration.createDefault(args[0]));
    byte[] primary = hex.parseHex(args[3]);
    long start = session.getTimestamp().getVersion();
    try (TwoPhaseCommitter committer = new TwoPhaseCommitter(session, start)) {
      committer.prewritePrimaryKey(ConcreteBackOffer.newCustomBackOff(20000), primary, ("java/" + start).getBytes());
      List<BytePairWrapper> secondaries = new ArrayList<>();
      List<ByteWrapper> secondaryKeys = new ArrayList<>();
      for (int i = 4; i < args.length; i++) {
        byte[] key = hex.parseHex(args[i]);
        secondaries.add(new BytePairWrapper(key, ("java/" + start + "/" + i).getBytes()));
        secondaryKeys.add(new ByteWrapper(key));
      }
      committer.prewriteSecondaryKeys(primary, secondaries.iterator(), 20000);
      long commit = session.getTimestamp().getVersion();
      committer.commitPrimaryKey(ConcreteBackOffer.newCustomBackOff(20000), primary, commit);
      committer.commitSecondaryKeys(secondaryKeys.iterator(), commit, 20000);
    }
    long ts = session.getTimestamp().getVersion();
    try (KVClient kv = session.createKVClient()) {
      List<Kvrpcpb.KvPair> pairs = kv.scan(ByteString.copyFrom(hex.parseHex(args[1])),
          ByteString.copyFrom(hex.parseHex(args[2])), ts);
      System.out.println(ts);
      for (Kvrpcpb.KvPair pair : pairs) {
        System.out.println("row " + hex.formatHex(pair.getKey().toByteArray()) + " "
            + hex.formatHex(pair.getValue().toByteArray()));
      }
    }
    session.close();
  }
}

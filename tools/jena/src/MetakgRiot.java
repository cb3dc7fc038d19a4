import java.util.concurrent.atomic.AtomicLong;
import org.apache.jena.atlas.lib.Sink;
import org.apache.jena.graph.Triple;
import org.apache.jena.riot.Lang;
import org.apache.jena.riot.RDFLanguages;
import org.apache.jena.riot.RDFParser;
import org.apache.jena.riot.system.ErrorHandlerFactory;
import org.apache.jena.riot.system.StreamRDFBase;
import org.apache.jena.sparql.core.Quad;

/**
 * Parses an RDF file as Jena's `riot --validate` does: strict checking, the first warning or error fails.
 * Prints the number of triples and quads (default graph: triples; named graphs: quads) and of named graphs.
 */
public class MetakgRiot {
    public static void main(String[] args) {
        if (args.length != 1) {
            System.err.println("usage: MetakgRiot FILE");
            System.exit(2);
        }
        Lang lang = RDFLanguages.filenameToLang(args[0]);
        AtomicLong triples = new AtomicLong();
        AtomicLong quads = new AtomicLong();
        java.util.Set<String> graphs = new java.util.HashSet<>();
        StreamRDFBase sink = new StreamRDFBase() {
            @Override public void triple(Triple triple) { triples.incrementAndGet(); }
            @Override public void quad(Quad quad) {
                if (quad.isDefaultGraph()) { triples.incrementAndGet(); }
                else { quads.incrementAndGet(); graphs.add(quad.getGraph().getURI()); }
            }
        };
        try {
            RDFParser.source(args[0]).lang(lang).checking(true)
                .errorHandler(ErrorHandlerFactory.errorHandlerStrict).parse(sink);
        } catch (Exception e) {
            System.out.println("INVALID " + e.getMessage());
            System.exit(1);
        }
        System.out.println("VALID triples=" + triples.get() + " quads=" + quads.get() + " graphs=" + graphs.size());
    }
}
